/*
 * The hetero search's two-column device step in C: the same values as _two_step in
 * milp_partition/hetero/search.py (its definition: out[e][a] = min over n of nxt[e][a - n t0] + (d - n) t1,
 * n of a stage's d replicas on column 0 with tp t0, d - n on column 1 with tp t1; n = 0 only when t1 > 0 and
 * n = d only when t0 > 0).  Every finite value is a whole number of devices (below 2^53), so every sum is exact
 * and the minima are the same in any order: this file returns bit for bit what the numpy step returns (the
 * tests compare both on random tables).  Per row e and residue r of a modulo t0 the minimum over n is a sliding
 * window minimum over k = j - n in [j - d, j] of y[k] = nxt[e][r + k t0] + k t1, kept with a monotone deque.
 * two_layer is one stage of the two-column table (each (s0, e) picks its tp pair's step), lambda_suffix the
 * weighted device suffix program; both do the same single additions and minima as their numpy forms.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* The buffers of objs[0..n-1], C-contiguous, those from first_writable on writable; returns how many were taken (n on
   success; fewer: a Python error is set; the caller releases the ones taken with release_buffers). */
static int take_buffers(PyObject **objs, Py_buffer *v, int n, int first_writable) {
    int got = 0;
    for (; got < n; got++)
        if (PyObject_GetBuffer(objs[got], &v[got], got >= first_writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
            break;
    return got;
}

static void release_buffers(Py_buffer *v, int got) {
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
}

/* out[e][a] (rows x width) = min over n of nxt[e][a - n t0] + (d - n) t1; 0 on success, -1 out of memory */
static int step_core(const double *nxt, double *out, Py_ssize_t rows, Py_ssize_t width, Py_ssize_t d, int t0, int t1) {
    Py_ssize_t n_all = rows * width;
    for (Py_ssize_t i = 0; i < n_all; i++) out[i] = INFINITY;
    if (!t0) { /* every replica on column 1 */
        if (t1)
            for (Py_ssize_t i = 0; i < n_all; i++) out[i] = nxt[i] + (double)d * t1;
        return 0;
    }
    if (!t1) { /* every replica on column 0 */
        Py_ssize_t shift = d * t0;
        for (Py_ssize_t e = 0; e < rows; e++)
            for (Py_ssize_t a = shift; a < width; a++) out[e * width + a] = nxt[e * width + a - shift];
        return 0;
    }
    Py_ssize_t jmax = width / t0 + 1;
    Py_ssize_t *dq = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)jmax);
    double *y = (double *)malloc(sizeof(double) * (size_t)jmax);
    if (!dq || !y) {
        free(dq);
        free(y);
        return -1;
    }
    for (Py_ssize_t e = 0; e < rows; e++) {
        const double *row = nxt + e * width;
        double *orow = out + e * width;
        Py_ssize_t a0 = 0;
        while (a0 < width && row[a0] == INFINITY) a0++;
        if (a0 == width) continue; /* an all-inf row gives an all-inf row (already set) */
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
    return 0;
}

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
    int rc = 0;
    if (vin.len < need || vout.len < need) {
        PyErr_SetString(PyExc_ValueError, "two_step: buffers smaller than rows x width doubles");
        rc = -2;
    } else {
        rc = step_core((const double *)vin.buf, (double *)vout.buf, rows, width, d, t0, t1);
        if (rc) PyErr_NoMemory();
    }
    PyBuffer_Release(&vin);
    PyBuffer_Release(&vout);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* two_layer(nxt, t0m, t1m, out, L1, width, d): out[s0][a] = min over e of conv_(t0m[s0][e], t1m[s0][e])[e][a], conv
   the step above of nxt (L1 x width), a pair (0, 0) skipped (no configuration); the steps computed once per pair. */
static PyObject *two_layer(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[4];
    Py_ssize_t L1, width, d;
    if (!PyArg_ParseTuple(args, "OOOOnnn", &objs[0], &objs[1], &objs[2], &objs[3], &L1, &width, &d)) return NULL;
    if (L1 < 0 || width < 0 || d < 0) {
        PyErr_SetString(PyExc_ValueError, "two_layer: negative size or degree");
        return NULL;
    }
    Py_buffer v[4];
    int got = take_buffers(objs, v, 4, 3);
    int rc = 0;
    double *conv[25] = {NULL};
    unsigned char *done[25] = {NULL};
    unsigned char *fin = NULL;
    if (got < 4) {
        rc = -2;
    } else if (v[0].len < L1 * width * (Py_ssize_t)sizeof(double) || v[3].len < L1 * width * (Py_ssize_t)sizeof(double) ||
               v[1].len < L1 * L1 * (Py_ssize_t)sizeof(long long) || v[2].len < L1 * L1 * (Py_ssize_t)sizeof(long long)) {
        PyErr_SetString(PyExc_ValueError, "two_layer: buffers too small");
        rc = -2;
    } else {
        const double *nxt = (const double *)v[0].buf;
        const long long *t0m = (const long long *)v[1].buf, *t1m = (const long long *)v[2].buf;
        double *out = (double *)v[3].buf;
        for (Py_ssize_t i = 0; i < L1 * width; i++) out[i] = INFINITY;
        /* a row e of nxt that is all inf gives every step's row e all inf: nothing to take the minimum of */
        fin = (unsigned char *)malloc((size_t)(L1 > 0 ? L1 : 1));
        if (!fin) {
            PyErr_NoMemory();
            rc = -1;
        }
        for (Py_ssize_t e = 0; e < L1 && !rc; e++) {
            fin[e] = 0;
            for (Py_ssize_t a = 0; a < width; a++)
                if (nxt[e * width + a] != INFINITY) {
                    fin[e] = 1;
                    break;
                }
        }
        for (Py_ssize_t s0 = 0; s0 < L1 && !rc; s0++) {
            double *orow = out + s0 * width;
            for (Py_ssize_t e = 0; e < L1; e++) {
                long long t0 = t0m[s0 * L1 + e], t1 = t1m[s0 * L1 + e];
                if (t0 < 0 || t0 > 4 || t1 < 0 || t1 > 4) {
                    PyErr_SetString(PyExc_ValueError, "two_layer: a tp outside 0..4");
                    rc = -2;
                    break;
                }
                if ((!t0 && !t1) || !fin[e]) continue;
                int slot = (int)(t0 * 5 + t1);
                if (!conv[slot]) {
                    conv[slot] = (double *)malloc(sizeof(double) * (size_t)(L1 * width > 0 ? L1 * width : 1));
                    done[slot] = (unsigned char *)calloc((size_t)L1, 1);
                    if (!conv[slot] || !done[slot]) {
                        PyErr_NoMemory();
                        rc = -1;
                        break;
                    }
                }
                /* the step's row e, computed when a pair first asks for it (rows are independent) */
                if (!done[slot][e]) {
                    if (step_core(nxt + e * width, conv[slot] + e * width, 1, width, d, (int)t0, (int)t1)) {
                        PyErr_NoMemory();
                        rc = -1;
                        break;
                    }
                    done[slot][e] = 1;
                }
                const double *crow = conv[slot] + e * width;
                /* an unconditional select (no NaN here: whole numbers or inf), which the compiler vectorizes */
                for (Py_ssize_t a = 0; a < width; a++) {
                    double c = crow[a], o = orow[a];
                    orow[a] = c < o ? c : o;
                }
            }
        }
    }
    for (int i = 0; i < 25; i++) free(conv[i]), free(done[i]);
    free(fin);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* lambda_suffix(masks, w, out, p, nk, T, L1): out[k][t][s0] (p + 1 x T x L1) = min over e of cost[k][t][s0][e] +
   out[k + 1][t][e], cost = the least w[t][c] over the configurations c masks[k][c][s0][e] allows (inf: none); out[p][t]
   = 0 at L1 - 1, inf elsewhere.  The same single additions and minima as the numpy program (the same values). */
static PyObject *lambda_suffix(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    Py_ssize_t p, nk, T, L1;
    if (!PyArg_ParseTuple(args, "OOOnnnn", &objs[0], &objs[1], &objs[2], &p, &nk, &T, &L1)) return NULL;
    if (p < 0 || nk < 0 || T < 0 || L1 < 1) {
        PyErr_SetString(PyExc_ValueError, "lambda_suffix: bad sizes");
        return NULL;
    }
    Py_buffer v[3];
    int got = take_buffers(objs, v, 3, 2);
    int rc = 0;
    double *cost = NULL;
    Py_ssize_t *fin = NULL;
    if (got < 3) {
        rc = -2;
    } else if (v[0].len < p * nk * L1 * L1 || v[1].len < T * nk * (Py_ssize_t)sizeof(double) ||
               v[2].len < (p + 1) * T * L1 * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "lambda_suffix: buffers too small");
        rc = -2;
    } else {
        const unsigned char *masks = (const unsigned char *)v[0].buf;
        const double *w = (const double *)v[1].buf;
        double *out = (double *)v[2].buf;
        for (Py_ssize_t i = 0; i < (p + 1) * T * L1; i++) out[i] = INFINITY;
        for (Py_ssize_t t = 0; t < T; t++) out[(p * T + t) * L1 + (L1 - 1)] = 0.0;
        cost = (double *)malloc(sizeof(double) * (size_t)(L1 * L1 > 0 ? L1 * L1 : 1));
        fin = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)L1);
        if (!cost || !fin) {
            PyErr_NoMemory();
            rc = -1;
        }
        for (Py_ssize_t k = p - 1; k >= 0 && !rc; k--) {
            for (Py_ssize_t t = 0; t < T; t++) {
                for (Py_ssize_t i = 0; i < L1 * L1; i++) cost[i] = INFINITY;
                for (Py_ssize_t c = 0; c < nk; c++) {
                    double wc = w[t * nk + c];
                    const unsigned char *m = masks + (k * nk + c) * L1 * L1;
                    for (Py_ssize_t i = 0; i < L1 * L1; i++)
                        if (m[i] && wc < cost[i]) cost[i] = wc;
                }
                const double *nxt = out + ((k + 1) * T + t) * L1;
                double *row = out + (k * T + t) * L1;
                /* an e with nxt[e] = inf gives inf (the weights are finite or inf, never -inf): skipped */
                Py_ssize_t nfin = 0;
                for (Py_ssize_t e = 0; e < L1; e++)
                    if (nxt[e] != INFINITY) fin[nfin++] = e;
                for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                    double best = INFINITY;
                    const double *crow = cost + s0 * L1;
                    for (Py_ssize_t f = 0; f < nfin; f++) {
                        double x = crow[fin[f]] + nxt[fin[f]];
                        if (x < best) best = x;
                    }
                    row[s0] = best;
                }
            }
        }
    }
    free(cost);
    free(fin);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* lambda_first(ylb, w, out, thr, p, nk, T, L1): out[t] = the first row sfx[0][t][0] of lambda_suffix with masks =
   (ylb <= thr), for a table ylb[k][c][s0][e] that is inf wherever e <= s0 (a stage holds at least one layer) and a
   finite thr.  Only the states a split from layer 0 reaches are computed: stage k starts at s0 in [k, L - (p - k)]
   and ends at e in [s0 + 1, L - (p - k - 1)] (every other state's value is inf or never read), with the same single
   additions and minima as the full program, so the same values. */
static PyObject *lambda_first(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    double thr;
    Py_ssize_t p, nk, T, L1;
    if (!PyArg_ParseTuple(args, "OOOdnnnn", &objs[0], &objs[1], &objs[2], &thr, &p, &nk, &T, &L1)) return NULL;
    if (p < 1 || nk < 0 || T < 1 || L1 < 1 || !isfinite(thr)) {
        PyErr_SetString(PyExc_ValueError, "lambda_first: bad sizes or threshold");
        return NULL;
    }
    Py_buffer v[3];
    int got = take_buffers(objs, v, 3, 2);
    int rc = 0;
    double *g = NULL, *h = NULL, *wmin = NULL;
    if (got < 3) {
        rc = -2;
    } else if (v[0].len < p * nk * L1 * L1 * (Py_ssize_t)sizeof(double) || v[1].len < T * nk * (Py_ssize_t)sizeof(double) ||
               v[2].len < T * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "lambda_first: buffers too small");
        rc = -2;
    } else {
        const double *ylb = (const double *)v[0].buf;
        const double *w = (const double *)v[1].buf;
        double *out = (double *)v[2].buf;
        Py_ssize_t L = L1 - 1;
        g = (double *)malloc(sizeof(double) * (size_t)(T * L1));
        h = (double *)malloc(sizeof(double) * (size_t)(T * L1));
        wmin = (double *)malloc(sizeof(double) * (size_t)T);
        if (!g || !h || !wmin) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            for (Py_ssize_t i = 0; i < T * L1; i++) g[i] = INFINITY;
            for (Py_ssize_t t = 0; t < T; t++) g[t * L1 + L] = 0.0;
            for (Py_ssize_t k = p - 1; k >= 0; k--) {
                Py_ssize_t s_lo = k, s_hi = k == 0 ? 0 : L - (p - k), e_hi = L - (p - k - 1);
                for (Py_ssize_t i = 0; i < T * L1; i++) h[i] = INFINITY;
                for (Py_ssize_t s0 = s_lo; s0 <= s_hi; s0++) {
                    for (Py_ssize_t e = s0 + 1; e <= e_hi; e++) {
                        for (Py_ssize_t t = 0; t < T; t++) wmin[t] = INFINITY;
                        for (Py_ssize_t c = 0; c < nk; c++)
                            if (ylb[((k * nk + c) * L1 + s0) * L1 + e] <= thr)
                                for (Py_ssize_t t = 0; t < T; t++)
                                    if (w[t * nk + c] < wmin[t]) wmin[t] = w[t * nk + c];
                        for (Py_ssize_t t = 0; t < T; t++) {
                            double nx = g[t * L1 + e];
                            if (wmin[t] == INFINITY || nx == INFINITY) continue;
                            double x = wmin[t] + nx;
                            if (x < h[t * L1 + s0]) h[t * L1 + s0] = x;
                        }
                    }
                }
                double *sw = g;
                g = h;
                h = sw;
            }
            for (Py_ssize_t t = 0; t < T; t++) out[t] = g[t * L1];
        }
    }
    free(g);
    free(h);
    free(wmin);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* lagrange_suffix(ylb, wm, out, p, nk, N, L1): out[n][k][s0] (N x p + 1 x L1) = min over e of cost[n][k][s0][e] +
   out[n][k + 1][e], cost = min over c of ylb[k][c][s0][e] + wm[n][c] (ylb inf where c may not serve the stage);
   out[n][p] = 0 at L1 - 1, inf elsewhere.  The same single additions and minima as the numpy program
   (milp_partition.hetero.search._lagrange_suffix); a term with ylb = inf or out[n][k + 1][e] = inf is inf (wm is finite),
   so it is skipped. */
static PyObject *lagrange_suffix(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    Py_ssize_t p, nk, N, L1;
    if (!PyArg_ParseTuple(args, "OOOnnnn", &objs[0], &objs[1], &objs[2], &p, &nk, &N, &L1)) return NULL;
    if (p < 0 || nk < 0 || N < 0 || L1 < 1) {
        PyErr_SetString(PyExc_ValueError, "lagrange_suffix: bad sizes");
        return NULL;
    }
    Py_buffer v[3];
    int got = take_buffers(objs, v, 3, 2);
    int rc = 0;
    double *cmin = NULL;
    if (got < 3) {
        rc = -2;
    } else if (v[0].len < p * nk * L1 * L1 * (Py_ssize_t)sizeof(double) || v[1].len < N * nk * (Py_ssize_t)sizeof(double) ||
               v[2].len < N * (p + 1) * L1 * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "lagrange_suffix: buffers too small");
        rc = -2;
    } else {
        const double *ylb = (const double *)v[0].buf;
        const double *wm = (const double *)v[1].buf;
        double *out = (double *)v[2].buf;
        Py_ssize_t plane = (p + 1) * L1; /* one n's table */
        for (Py_ssize_t i = 0; i < N * plane; i++) out[i] = INFINITY;
        for (Py_ssize_t n = 0; n < N; n++) out[n * plane + p * L1 + (L1 - 1)] = 0.0;
        cmin = (double *)malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
        if (!cmin) {
            PyErr_NoMemory();
            rc = -1;
        }
        for (Py_ssize_t k = p - 1; k >= 0 && !rc; k--) {
            for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                for (Py_ssize_t e = 0; e < L1; e++) {
                    int any = 0;
                    for (Py_ssize_t n = 0; n < N; n++) cmin[n] = INFINITY;
                    for (Py_ssize_t c = 0; c < nk; c++) {
                        double y = ylb[((k * nk + c) * L1 + s0) * L1 + e];
                        if (y == INFINITY) continue;
                        any = 1;
                        const double *wrow = wm + c; /* wm[n][c] at n * nk */
                        for (Py_ssize_t n = 0; n < N; n++) {
                            double x = y + wrow[n * nk];
                            if (x < cmin[n]) cmin[n] = x;
                        }
                    }
                    if (!any) continue;
                    for (Py_ssize_t n = 0; n < N; n++) {
                        double nx = out[n * plane + (k + 1) * L1 + e];
                        if (nx == INFINITY) continue;
                        double x = cmin[n] + nx;
                        double *dst = out + n * plane + k * L1 + s0;
                        if (x < *dst) *dst = x;
                    }
                }
            }
        }
    }
    free(cmin);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* two_use(g, out, width, d, t0, t1, nlo, nhi): out[a] = min over n in [nlo, nhi] with a - n t0 >= 0 of
   g[a - n t0] + (d - n) t1 (inf where none): a decided stage's n replicas on column 0, d - n on column 1. */
static PyObject *two_use(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_g, *o_out;
    Py_ssize_t width, d, nlo, nhi;
    int t0, t1;
    if (!PyArg_ParseTuple(args, "OOnniinn", &o_g, &o_out, &width, &d, &t0, &t1, &nlo, &nhi)) return NULL;
    if (width < 0 || t0 < 0 || t1 < 0 || nlo < 0) {
        PyErr_SetString(PyExc_ValueError, "two_use: negative size, tp or count");
        return NULL;
    }
    Py_buffer vg, vo;
    if (PyObject_GetBuffer(o_g, &vg, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(o_out, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&vg);
        return NULL;
    }
    int rc = 0;
    if (vg.len < width * (Py_ssize_t)sizeof(double) || vo.len < width * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "two_use: buffers smaller than width doubles");
        rc = -2;
    } else {
        const double *g = (const double *)vg.buf;
        double *out = (double *)vo.buf;
        for (Py_ssize_t a = 0; a < width; a++) out[a] = INFINITY;
        if (nlo <= nhi) {
            if (!t0) { /* a - n t0 = a for every n: the least (d - n) t1 is at n = nhi */
                for (Py_ssize_t a = 0; a < width; a++) out[a] = g[a] + (double)t1 * (double)(d - nhi);
            } else {
                Py_ssize_t jmax = width / t0 + 1;
                Py_ssize_t *dq = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)jmax);
                double *y = (double *)malloc(sizeof(double) * (size_t)jmax);
                if (!dq || !y) {
                    PyErr_NoMemory();
                    rc = -1;
                } else {
                    for (Py_ssize_t r = 0; r < t0 && r < width; r++) {
                        Py_ssize_t jn = (width - r + t0 - 1) / t0;
                        for (Py_ssize_t k = 0; k < jn; k++) y[k] = g[r + k * t0] + (double)(t1 * k);
                        Py_ssize_t head = 0, tail = 0;
                        for (Py_ssize_t j = 0; j < jn; j++) {
                            Py_ssize_t kin = j - nlo; /* k = j - n in [j - nhi, j - nlo] */
                            if (kin >= 0) {
                                while (tail > head && y[dq[tail - 1]] >= y[kin]) tail--;
                                dq[tail++] = kin;
                            }
                            while (tail > head && dq[head] < j - nhi) head++;
                            if (tail > head) out[r + j * t0] = y[dq[head]] + (double)t1 * (double)(d - j);
                        }
                    }
                }
                free(dq);
                free(y);
            }
        }
    }
    PyBuffer_Release(&vg);
    PyBuffer_Release(&vo);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* two_fits(g, nxt, width): the least over a of g[a] + nxt[width - 1 - a] (the decided stages' column-1 devices with
   at most a of column 0, plus the later stages' with the rest). */
static PyObject *two_fits(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_g, *o_n;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOn", &o_g, &o_n, &width)) return NULL;
    Py_buffer vg, vn;
    if (PyObject_GetBuffer(o_g, &vg, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(o_n, &vn, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&vg);
        return NULL;
    }
    double best = INFINITY;
    int bad = width < 0 || vg.len < width * (Py_ssize_t)sizeof(double) || vn.len < width * (Py_ssize_t)sizeof(double);
    if (!bad) {
        const double *g = (const double *)vg.buf, *n = (const double *)vn.buf;
        for (Py_ssize_t a = 0; a < width; a++) {
            double x = g[a] + n[width - 1 - a];
            if (x < best) best = x;
        }
    }
    PyBuffer_Release(&vg);
    PyBuffer_Release(&vn);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "two_fits: buffers smaller than width doubles");
        return NULL;
    }
    return PyFloat_FromDouble(best);
}

/* split_dp(yk, tps, gmax0, gsum0, p, L1, ntp, budget): the split programs of Search.root_split over (stage, first
   layer, tp budget).  yk [p][ntp][L1][L1]: stage k's least y over layers s..e-1 among configurations of tp tps[ti]
   (inf: none).  g[L][b] = (-inf, 0); stage k over s..e-1 with least tp t: nmax[s][b] = min max(y, gmax[e][b - t]),
   nsum[s][b] = min y + gsum[e][b - t], for s in [k, L - p + k], e in [k + 1, L - p + k + 1], b >= t.  Writes row s = 0
   of the last step (budget + 1 values each).  The same maxima, single additions and minima as the numpy program. */
static PyObject *split_dp(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[4];
    Py_ssize_t p, L1, ntp, budget;
    if (!PyArg_ParseTuple(args, "OOOOnnnn", &objs[0], &objs[1], &objs[2], &objs[3], &p, &L1, &ntp, &budget)) return NULL;
    if (p < 1 || L1 < 2 || ntp < 0 || budget < 0) {
        PyErr_SetString(PyExc_ValueError, "split_dp: bad sizes");
        return NULL;
    }
    Py_buffer v[4];
    int got = take_buffers(objs, v, 4, 2);
    int rc = 0;
    double *g[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t B = budget + 1, L = L1 - 1;
    if (got < 4) {
        rc = -2;
    } else if (v[0].len < p * ntp * L1 * L1 * (Py_ssize_t)sizeof(double) || v[1].len < ntp * (Py_ssize_t)sizeof(long long) ||
               v[2].len < B * (Py_ssize_t)sizeof(double) || v[3].len < B * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "split_dp: buffers too small");
        rc = -2;
    } else {
        for (int i = 0; i < 4; i++) {
            g[i] = (double *)malloc(sizeof(double) * (size_t)(L1 * B));
            if (!g[i]) rc = -1;
        }
        if (rc) PyErr_NoMemory();
    }
    if (!rc) {
        const double *yk = (const double *)v[0].buf;
        const long long *tps = (const long long *)v[1].buf;
        double *gmax = g[0], *gsum = g[1], *nmax = g[2], *nsum = g[3];
        for (Py_ssize_t i = 0; i < L1 * B; i++) gmax[i] = gsum[i] = INFINITY;
        for (Py_ssize_t b = 0; b < B; b++) {
            gmax[L * B + b] = -INFINITY;
            gsum[L * B + b] = 0.0;
        }
        for (Py_ssize_t k = p - 1; k >= 0; k--) {
            for (Py_ssize_t i = 0; i < L1 * B; i++) nmax[i] = nsum[i] = INFINITY;
            Py_ssize_t s_hi = L - p + k, e_lo = k + 1, e_hi = L - p + k + 1;
            for (Py_ssize_t ti = 0; ti < ntp; ti++) {
                Py_ssize_t t = (Py_ssize_t)tps[ti];
                if (t > budget || t < 0) continue;
                const double *y = yk + ((k * ntp + ti) * L1) * L1;
                for (Py_ssize_t s0 = k; s0 <= s_hi; s0++) {
                    double *rmax = nmax + s0 * B, *rsum = nsum + s0 * B;
                    for (Py_ssize_t e = e_lo; e <= e_hi; e++) {
                        double ys = y[s0 * L1 + e];
                        if (ys == INFINITY) continue; /* its candidates are inf: no minimum moves */
                        const double *gm = gmax + e * B, *gs = gsum + e * B;
                        for (Py_ssize_t b = t; b < B; b++) {
                            double cm = ys > gm[b - t] ? ys : gm[b - t];
                            if (cm < rmax[b]) rmax[b] = cm;
                            double cs = ys + gs[b - t];
                            if (cs < rsum[b]) rsum[b] = cs;
                        }
                    }
                }
            }
            double *tmp = gmax;
            gmax = nmax;
            nmax = tmp;
            tmp = gsum;
            gsum = nsum;
            nsum = tmp;
        }
        memcpy(v[2].buf, gmax, sizeof(double) * (size_t)B);
        memcpy(v[3].buf, gsum, sizeof(double) * (size_t)B);
    }
    for (int i = 0; i < 4; i++) free(g[i]);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}


/* Whether some a has out[a] + row[width - 1 - a] <= cap1, out being two_use's (min over n in [nlo, nhi] with
   a - n t0 >= 0 of g[a - n t0] + (d - n) t1, inf where none; scratch dq and y of at least width / t0 + 1 entries): the
   search's two_ok after two_use, with two_use's loop and sums, stopping at the first entry that fits. */
static int two_use_fits(const double *g, const double *row, double cap1, Py_ssize_t width, Py_ssize_t d, int t0, int t1,
                        Py_ssize_t nlo, Py_ssize_t nhi, Py_ssize_t *dq, double *y) {
    if (nlo > nhi) return 0;
    if (!t0) {
        for (Py_ssize_t a = 0; a < width; a++)
            if (g[a] + (double)t1 * (double)(d - nhi) + row[width - 1 - a] <= cap1) return 1;
        return 0;
    }
    for (Py_ssize_t r = 0; r < t0 && r < width; r++) {
        Py_ssize_t jn = (width - r + t0 - 1) / t0;
        for (Py_ssize_t k = 0; k < jn; k++) y[k] = g[r + k * t0] + (double)(t1 * k);
        Py_ssize_t head = 0, tail = 0;
        for (Py_ssize_t j = 0; j < jn; j++) {
            Py_ssize_t kin = j - nlo;
            if (kin >= 0) {
                while (tail > head && y[dq[tail - 1]] >= y[kin]) tail--;
                dq[tail++] = kin;
            }
            while (tail > head && dq[head] < j - nhi) head++;
            if (tail > head) {
                Py_ssize_t a = r + j * t0;
                if (y[dq[head]] + (double)t1 * (double)(d - j) + row[width - 1 - a] <= cap1) return 1;
            }
        }
    }
    return 0;
}

/* stage_scan: one node of the search's tree (search.py, _Triple.rec) over every (end e, set q) at once: which pairs
   the bound and the weighted device budget keep.  Arguments (all C-contiguous; Q sets, T weights, L1 = layers + 1,
   n ends):
     ends int64[n]; cq [Q][L1][L1]; aq [Q][L1]; uq [Q][L1]; arq [Q][L1][L1]; set_bits int64[Q]; allowed int64[L1]
     (the configurations' bits allowed for this stage from s, per e); ymax2, ysum2, bhere [Q]; restsum, restmax [L1];
     usage [Q][T]; used [T]; sfx [T][L1]; caps [T]; out: cand int64[n][Q], cnt int64[n], minlb [n], basemin [n];
     the two-column test: g [W] (the decided stages' column-1 devices per column-0 budget), twoq int64[Q][4] (per set
     t0, t1, nlo, nhi of two_use), nxt [L1][W] (the later stages' table from each e: all inf where none);
     then s, last, Q, T, L1, n, W, d, two (0: no two-column test) and the doubles ka, kb, mm1 (m - 1), floor_y, umax,
     armax, umin, ar_floor, value, keep (1 - PRUNE_REL), cap1.
   Per e (in the given order) and allowed set q (bits within allowed[e]), in set order: yi = ci + (ka a + kb b),
   big = max(ymax2, yi, base), base = max(restmax[e], floor_y), lb = mm1 big + ysum2 + yi + restsum[e] + max(u, umin)
   + max(ar, ar_floor) with u = max(umax, uq[q][s]), ar = max(armax, arq[q][s][e]): the same operations in the same
   order as the Python loop (no contraction: setup.py passes -ffp-contract=off).  cand lists the q with
   not (lb keep >= value) and every weighted budget (usage[q][t] + used[t]) + sfx[t][e] <= caps[t]; minlb[e] is the
   least lb keep over the allowed sets (a NaN counts as -inf: it never prunes), basemin[e] the least ci over them.
   With two, a kept q must also pass the two-column test: min over a of g2[a] + nxt[e][W - 1 - a] <= cap1 with g2 =
   two_use(g, d, t0, t1, nlo, nhi) (the search's two_use and two_ok: whole numbers, the same sums; two_use_fits). */
static PyObject *stage_scan(PyObject *self, PyObject *args) {
    (void)self;
    enum { NB = 23 };
    PyObject *o[NB];
    Py_ssize_t s, last, nq, nt, l1, n, w, d, two;
    double ka, kb, mm1, floor_y, umax, armax, umin, ar_floor, value, keep, cap1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOOOOOOOnnnnnnnnnddddddddddd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16], &o[17],
                          &o[18], &o[19], &o[20], &o[21], &o[22], &s, &last, &nq, &nt, &l1, &n, &w, &d, &two, &ka, &kb,
                          &mm1, &floor_y, &umax, &armax, &umin, &ar_floor, &value, &keep, &cap1))
        return NULL;
    if (s < 0 || s >= l1 || nq < 0 || nt < 0 || n < 0 || w < 1 || d < 0) {
        PyErr_SetString(PyExc_ValueError, "stage_scan: bad sizes");
        return NULL;
    }
    /* expected sizes in bytes, in argument order */
    const Py_ssize_t need[NB] = {n * 8,      nq * l1 * l1 * 8, nq * l1 * 8, nq * l1 * 8, nq * l1 * l1 * 8,
                                 nq * 8,     l1 * 8,           nq * 8,      nq * 8,      nq * 8,
                                 l1 * 8,     l1 * 8,           nq * nt * 8, nt * 8,      nt * l1 * 8,
                                 nt * 8,     n * nq * 8,       n * 8,       n * 8,       n * 8,
                                 two ? w * 8 : 0, two ? nq * 4 * 8 : 0, two ? l1 * w * 8 : 0};
    Py_buffer v[NB];
    int got = 0, rc = 0;
    for (; got < NB; got++) { /* on a failure, got counts the buffers held (released below) */
        int flags = PyBUF_C_CONTIGUOUS | (got >= 16 && got < 20 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(o[got], &v[got], flags) < 0) {
            rc = -1;
            break;
        }
        if (v[got].len < need[got]) {
            PyErr_Format(PyExc_ValueError, "stage_scan: argument %d is smaller than expected", got);
            got++;
            rc = -1;
            break;
        }
    }
    if (!rc) {
        const int64_t *ends = (const int64_t *)v[0].buf;
        const double *cq = (const double *)v[1].buf, *aq = (const double *)v[2].buf, *uq = (const double *)v[3].buf;
        const double *arq = (const double *)v[4].buf;
        const int64_t *bits = (const int64_t *)v[5].buf, *allowed = (const int64_t *)v[6].buf;
        const double *ymax2 = (const double *)v[7].buf, *ysum2 = (const double *)v[8].buf, *bhere = (const double *)v[9].buf;
        const double *restsum = (const double *)v[10].buf, *restmax = (const double *)v[11].buf;
        const double *usage = (const double *)v[12].buf, *used = (const double *)v[13].buf, *sfx = (const double *)v[14].buf;
        const double *caps = (const double *)v[15].buf;
        int64_t *cand = (int64_t *)v[16].buf, *cnt = (int64_t *)v[17].buf;
        double *minlb = (double *)v[18].buf, *basemin = (double *)v[19].buf;
        const double *g = (const double *)v[20].buf, *nxt = (const double *)v[22].buf;
        const int64_t *twoq = (const int64_t *)v[21].buf;
        double *y = NULL;
        Py_ssize_t *dq = NULL;
        if (two) {
            y = (double *)malloc(sizeof(double) * (size_t)(w + 1));
            dq = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)(w + 1));
            if (!y || !dq) {
                free(y), free(dq);
                y = NULL, dq = NULL;
                PyErr_NoMemory();
                rc = -1;
                n = 0; /* no work: the buffers are released below */
            }
        }
        for (Py_ssize_t idx = 0; idx < n; idx++) {
            Py_ssize_t e = (Py_ssize_t)ends[idx];
            int64_t k = 0;
            double best_lb = INFINITY, best_c = INFINITY;
            if (e <= s || e >= l1) {
                cnt[idx] = 0, minlb[idx] = best_lb, basemin[idx] = best_c;
                continue;
            }
            int64_t mask = allowed[e];
            double rs = restsum[e], rm = restmax[e];
            double base = rm >= floor_y ? rm : floor_y;
            for (Py_ssize_t q = 0; q < nq; q++) {
                if ((bits[q] & mask) != bits[q]) continue;
                double ci = cq[(q * l1 + s) * l1 + e];
                if (ci < best_c) best_c = ci;
                double a = last ? 0.0 : aq[q * l1 + e];
                double yi = ci + (ka * a + kb * bhere[q]);
                double big = ymax2[q] >= yi ? ymax2[q] : yi;
                if (base > big) big = base;
                double uqv = uq[q * l1 + s], arv = arq[(q * l1 + s) * l1 + e];
                double u = umax >= uqv ? umax : uqv;
                double ar = armax >= arv ? armax : arv;
                double lb = mm1 * big + ysum2[q] + yi + rs + (u >= umin ? u : umin) + (ar >= ar_floor ? ar : ar_floor);
                double lbk = lb * keep;
                if (lbk != lbk) lbk = -INFINITY;
                if (lbk < best_lb) best_lb = lbk;
                if (lb * keep >= value) continue;
                int ok = 1;
                for (Py_ssize_t t = 0; t < nt && ok; t++)
                    if (!((usage[q * nt + t] + used[t]) + sfx[t * l1 + e] <= caps[t])) ok = 0;
                if (ok && two) {
                    const int64_t *tq = twoq + 4 * q;
                    ok = two_use_fits(g, nxt + e * w, cap1, w, d, (int)tq[0], (int)tq[1], (Py_ssize_t)tq[2],
                                      (Py_ssize_t)tq[3], dq, y);
                }
                if (ok) cand[idx * nq + k++] = (int64_t)q;
            }
            cnt[idx] = k, minlb[idx] = best_lb, basemin[idx] = best_c;
        }
        free(y), free(dq);
    }
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* ar_dp(table, tps, out, ntp, L1, budget, pmax): the T_sync split program of Search.ar_split.  table[i][s][e] (ntp x L1
   x L1) is the least all-reduce of layers s..e-1 at least tp tps[i], inf where e <= s; out[j][b] ((pmax + 1) x
   (budget + 1)) = the least, over j stages from layer 0 with tp budget b, of the largest stage's table value: g_0 = 0
   at L (inf elsewhere), g_j[s][b] = min over i (tps[i] <= b) and e of max(table[i][s][e], g_{j-1}[e][b - tps[i]]), out[j]
   = g_j[0] (out[0] all inf).  Only s <= L - j and e <= L - j + 1 are computed (every other entry is inf: a stage holds
   one layer at least); maxima and minima only, so the same values as the numpy program (no NaN in the table). */
static PyObject *ar_dp(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[3];
    Py_ssize_t ntp, L1, budget, pmax;
    if (!PyArg_ParseTuple(args, "OOOnnnn", &objs[0], &objs[1], &objs[2], &ntp, &L1, &budget, &pmax)) return NULL;
    if (ntp < 0 || L1 < 1 || budget < 0 || pmax < 0) {
        PyErr_SetString(PyExc_ValueError, "ar_dp: bad sizes");
        return NULL;
    }
    Py_buffer v[3];
    int got = take_buffers(objs, v, 3, 2);
    int rc = 0;
    double *g = NULL, *h = NULL;
    Py_ssize_t B1 = budget + 1;
    if (got < 3) {
        rc = -2;
    } else if (v[0].len < ntp * L1 * L1 * (Py_ssize_t)sizeof(double) || v[1].len < ntp * (Py_ssize_t)sizeof(long long) ||
               v[2].len < (pmax + 1) * B1 * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "ar_dp: buffers too small");
        rc = -2;
    } else {
        const double *table = (const double *)v[0].buf;
        const long long *tps = (const long long *)v[1].buf;
        double *out = (double *)v[2].buf;
        Py_ssize_t L = L1 - 1;
        g = (double *)malloc(sizeof(double) * (size_t)(L1 * B1));
        h = (double *)malloc(sizeof(double) * (size_t)(L1 * B1));
        if (!g || !h) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            for (Py_ssize_t i = 0; i < L1 * B1; i++) g[i] = INFINITY;
            for (Py_ssize_t b = 0; b < B1; b++) g[L * B1 + b] = 0.0, out[b] = INFINITY;
            for (Py_ssize_t j = 1; j <= pmax; j++) {
                for (Py_ssize_t i = 0; i < L1 * B1; i++) h[i] = INFINITY;
                for (Py_ssize_t s = 0; s <= L - j; s++) {
                    double *hrow = h + s * B1;
                    for (Py_ssize_t i = 0; i < ntp; i++) {
                        Py_ssize_t t = (Py_ssize_t)tps[i];
                        if (t > budget || t < 0) continue;
                        const double *arow = table + (i * L1 + s) * L1;
                        for (Py_ssize_t e = s + 1; e <= L - j + 1; e++) {
                            double a = arow[e];
                            if (a == INFINITY) continue;
                            const double *grow = g + e * B1;
                            for (Py_ssize_t b = t; b < B1; b++) {
                                double x = grow[b - t];
                                double m = a > x ? a : x;
                                if (m < hrow[b]) hrow[b] = m;
                            }
                        }
                    }
                }
                double *sw = g;
                g = h;
                h = sw;
                for (Py_ssize_t b = 0; b < B1; b++) out[j * B1 + b] = g[b];
            }
        }
    }
    free(g);
    free(h);
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"two_step", two_step, METH_VARARGS,
     "two_step(nxt, out, rows, width, d, t0, t1): the two-column device step of milp_partition.hetero.search "
     "(_two_step) into out (float64, C-contiguous, rows x width)."},
    {"two_layer", two_layer, METH_VARARGS,
     "two_layer(nxt, t0m, t1m, out, L1, width, d): one stage of the two-column table (Triple.two_tables)."},
    {"lambda_suffix", lambda_suffix, METH_VARARGS,
     "lambda_suffix(masks, w, out, p, nk, T, L1): the weighted device suffix program (_lambda_suffix)."},
    {"lambda_first", lambda_first, METH_VARARGS,
     "lambda_first(ylb, w, out, thr, p, nk, T, L1): the program's first row under ylb <= thr (_lambda_first)."},
    {"lagrange_suffix", lagrange_suffix, METH_VARARGS,
     "lagrange_suffix(ylb, wm, out, p, nk, N, L1): the Lagrangian sum program of the later stages (_lagrange_suffix)."},
    {"two_use", two_use, METH_VARARGS,
     "two_use(g, out, width, d, t0, t1, nlo, nhi): the decided stages' two-column use after one more stage."},
    {"stage_scan", stage_scan, METH_VARARGS, "stage_scan(...): the (end, set) pairs one node of the search keeps."},
    {"two_fits", two_fits, METH_VARARGS, "two_fits(g, nxt, width): min over a of g[a] + nxt[width - 1 - a]."},
    {"split_dp", split_dp, METH_VARARGS,
     "split_dp(yk, tps, gmax0, gsum0, p, L1, ntp, budget): Search.root_split's programs (row of the first layer)."},
    {"ar_dp", ar_dp, METH_VARARGS, "ar_dp(table, tps, out, ntp, L1, budget, pmax): Search.ar_split's program (rows of layer 0)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hetero", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__hetero(void) { return PyModule_Create(&module); }
