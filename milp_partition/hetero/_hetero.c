/*
 * The hetero search's two-column device step in C: the same values as _two_step in
 * milp_partition/hetero/search.py (its definition: out[e][a] = min over n of nxt[e][a - n t0] + (d - n) t1,
 * n of a stage's d replicas on column 0 with tp t0, d - n on column 1 with tp t1; n = 0 only when t1 > 0 and
 * n = d only when t0 > 0).  Every finite value is a whole number of devices (below 2^53), so every sum is exact
 * and the minima are the same in any order: this file returns bit for bit what the numpy step returns (the
 * tests compare both on random tables).  Per row e and residue r of a modulo t0 the minimum over n is a sliding
 * window minimum over k = j - n in [j - d, j] of y[k] = nxt[e][r + k t0] + k t1, kept with a monotone deque.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>

static PyObject *two_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_in, *o_out;
    Py_ssize_t rows, width, d;
    int t0, t1;
    if (!PyArg_ParseTuple(args, "OOnnnii", &o_in, &o_out, &rows, &width, &d, &t0, &t1)) return NULL;
    if (rows < 0 || width < 0 || d < 0 || t0 < 0 || t1 < 0) {
        PyErr_SetString(PyExc_ValueError, "two_step: negative size, degree or tp");
        return NULL;
    }
    Py_buffer vin, vout;
    if (PyObject_GetBuffer(o_in, &vin, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(o_out, &vout, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&vin);
        return NULL;
    }
    Py_ssize_t need = rows * width * (Py_ssize_t)sizeof(double);
    if (vin.len < need || vout.len < need) {
        PyBuffer_Release(&vin);
        PyBuffer_Release(&vout);
        PyErr_SetString(PyExc_ValueError, "two_step: buffers smaller than rows x width doubles");
        return NULL;
    }
    const double *nxt = (const double *)vin.buf;
    double *out = (double *)vout.buf;
    Py_ssize_t n_all = rows * width;
    for (Py_ssize_t i = 0; i < n_all; i++) out[i] = INFINITY;
    if (!t0) { /* every replica on column 1 */
        if (t1)
            for (Py_ssize_t i = 0; i < n_all; i++) out[i] = nxt[i] + (double)d * t1;
    } else if (!t1) { /* every replica on column 0 */
        Py_ssize_t shift = d * t0;
        for (Py_ssize_t e = 0; e < rows; e++)
            for (Py_ssize_t a = shift; a < width; a++) out[e * width + a] = nxt[e * width + a - shift];
    } else {
        Py_ssize_t jmax = width / t0 + 1;
        Py_ssize_t *dq = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)jmax);
        double *y = (double *)malloc(sizeof(double) * (size_t)jmax);
        if (!dq || !y) {
            free(dq);
            free(y);
            PyBuffer_Release(&vin);
            PyBuffer_Release(&vout);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t e = 0; e < rows; e++) {
            const double *row = nxt + e * width;
            double *orow = out + e * width;
            for (Py_ssize_t r = 0; r < t0 && r < width; r++) {
                Py_ssize_t jn = (width - r + t0 - 1) / t0;
                Py_ssize_t head = 0, tail = 0; /* deque dq[head..tail): indices, y increasing */
                for (Py_ssize_t j = 0; j < jn; j++) {
                    y[j] = row[r + j * t0] + (double)(t1 * j);
                    while (tail > head && y[dq[tail - 1]] >= y[j]) tail--;
                    dq[tail++] = j;
                    while (dq[head] < j - d) head++;
                    orow[r + j * t0] = y[dq[head]] + (double)t1 * (double)(d - j);
                }
            }
        }
        free(dq);
        free(y);
    }
    PyBuffer_Release(&vin);
    PyBuffer_Release(&vout);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"two_step", two_step, METH_VARARGS,
     "two_step(nxt, out, rows, width, d, t0, t1): the two-column device step of milp_partition.hetero.search "
     "(_two_step) into out (float64, C-contiguous, rows x width)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hetero", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__hetero(void) { return PyModule_Create(&module); }
