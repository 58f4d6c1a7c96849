/*
 * The joint polisher's group split in C: the branch and bound of _GroupSplit._branch
 * (heuristics/joint_polish.py), the same search in the same order with the same cuts.
 *
 * The nodes of a group of stages go, in a topological order (positions 0 .. n-1), each to one of the
 * group's sides.  Per side the search keeps a lower bound of its time (the nodes' least seconds and the
 * edges cut so far, `now`) and its least bytes (`used`); a branch is cut where a side reaches the target
 * (the group's slowest stage now, then the best split found), where the nodes left cannot fit under the
 * target in device-seconds (`rest`) or in bytes (`rest_bytes`), or where a side's memory is passed.  A
 * complete split is handed to Python (`leaf()`, which reads `side` and `now`, prices the stages exactly
 * and returns the target to beat from then on): this file decides which splits are priced, never a
 * plan's value, and the plan the polisher keeps is re-checked by the verifier.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    int G, n;
    const int32_t *allowed_start, *allowed; /* CSR per position: the sides it may go to, ascending */
    const int32_t *pred_start, *pred;       /* CSR per position: its predecessors' positions in the group */
    const int32_t *link_start, *link;       /* CSR per position: its neighbours' positions in the group */
    const double *link_bytes;               /* ... and twice the bytes of that edge */
    const double *cost, *mem;               /* [G * n]: the node's least seconds and bytes on each side */
    const double *outside;                  /* [n]: twice the bytes of its edges out of the group */
    const double *per_byte, *weights;       /* [G]: seconds per byte, d */
    const double *rest, *rest_bytes;        /* [n + 1]: least device-seconds and bytes of positions k.. */
    double memory, target;
    long visits;
    int32_t *side; /* [n]: the side of each placed position, -1 where not placed (read by leaf) */
    double *now;   /* [G]: each side's lower bound of its time (read by leaf) */
    double *used;  /* [G]: each side's least bytes */
    PyObject *leaf, *expired;
    int error;
} Split;

/* a Python callable's answer as a double; sets s->error on an exception */
static double call_double(Split *s, PyObject *fn) {
    PyObject *got = PyObject_CallNoArgs(fn);
    if (got == NULL) {
        s->error = 1;
        return 0.0;
    }
    double x = PyFloat_AsDouble(got);
    Py_DECREF(got);
    if (x == -1.0 && PyErr_Occurred()) s->error = 1;
    return x;
}

static void branch(Split *s, int k) {
    if (s->error) return;
    s->visits -= 1;
    if (s->visits < 0) {
        s->visits = -1;
        return;
    }
    if (s->visits % 4096 == 0) {
        double gone = call_double(s, s->expired);
        if (s->error) return;
        if (gone != 0.0) {
            s->visits = -1;
            return;
        }
    }
    if (k == s->n) {
        double target = call_double(s, s->leaf);
        if (!s->error) s->target = target;
        return;
    }
    const int G = s->G, n = s->n;
    double target = s->target, *now = s->now, *used = s->used;
    /* every side below the target: its d times its time left holds its nodes' least seconds times d */
    double slack = 0.0, free_bytes = 0.0;
    for (int q = 0; q < G; ++q) slack += s->weights[q] * (target - now[q]);
    if (s->rest[k] > slack * (1 + 1e-9)) return;
    for (int q = 0; q < G; ++q) free_bytes += s->memory - used[q];
    if (s->rest_bytes[k] > free_bytes * (1 + 1e-9)) return; /* and every side's memory */
    int lowest = 0;
    for (int32_t x = s->pred_start[k]; x < s->pred_start[k + 1]; ++x)
        if (s->side[s->pred[x]] > lowest) lowest = s->side[s->pred[x]];
    for (int32_t a = s->allowed_start[k]; a < s->allowed_start[k + 1]; ++a) {
        int q = s->allowed[a];
        double m = s->mem[q * n + k];
        if (q < lowest || used[q] + m > s->memory) continue;
        /* the node's seconds, its edges out of the group and to nodes placed on other sides, on both ends */
        double cut = s->outside[k];
        for (int32_t x = s->link_start[k]; x < s->link_start[k + 1]; ++x) {
            int r = s->side[s->link[x]];
            if (r >= 0 && r != q) cut += s->link_bytes[x];
        }
        double mine = s->cost[q * n + k] + cut * s->per_byte[q];
        now[q] += mine;
        int below = now[q] < target;
        for (int32_t x = s->link_start[k]; x < s->link_start[k + 1]; ++x) {
            int r = s->side[s->link[x]];
            if (r >= 0 && r != q) {
                now[r] += s->link_bytes[x] * s->per_byte[r];
                below = below && now[r] < target;
            }
        }
        if (below) {
            s->side[k] = q;
            used[q] += m;
            branch(s, k + 1);
            used[q] -= m;
            s->side[k] = -1;
            if (s->error) return;
            target = s->target;
        }
        now[q] -= mine;
        for (int32_t x = s->link_start[k]; x < s->link_start[k + 1]; ++x) {
            int r = s->side[s->link[x]];
            if (r >= 0 && r != q) now[r] -= s->link_bytes[x] * s->per_byte[r];
        }
    }
}

#define NBUF 17

static PyObject *py_split(PyObject *self, PyObject *args) {
    PyObject *objs[NBUF], *leaf, *expired;
    double target;
    long visits;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOdlOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &objs[8], &objs[9], &objs[10], &objs[11], &objs[12], &objs[13], &objs[14],
                          &objs[15], &objs[16], &target, &visits, &leaf, &expired))
        return NULL;
    if (!PyCallable_Check(leaf) || !PyCallable_Check(expired)) {
        PyErr_SetString(PyExc_TypeError, "groupsplit: leaf and expired must be callables");
        return NULL;
    }
    Py_buffer v[NBUF];
    int got = 0;
    for (; got < NBUF; ++got) {
        int writable = got == 14 || got == 15; /* side, now */
        if (PyObject_GetBuffer(objs[got], &v[got], PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) break;
    }
    PyObject *out = NULL;
    if (got == NBUF) {
        /* 0 allowed_start, 1 allowed, 2 pred_start, 3 pred, 4 link_start, 5 link, 6 link_bytes, 7 cost, 8 mem,
         * 9 outside, 10 per_byte, 11 weights, 12 rest, 13 rest_bytes, 14 side, 15 now, 16 kind_memory (the cluster's
         * memory per device of each kind; the sides are devices of one kind: index 0) */
        long n = (long)(v[9].len / (Py_ssize_t)sizeof(double)), G = (long)(v[10].len / (Py_ssize_t)sizeof(double));
        const int32_t *as = v[0].buf, *ps = v[2].buf, *ls = v[4].buf;
        int ok = G >= 1 && n >= 0;
        ok = ok && v[0].len == (Py_ssize_t)sizeof(int32_t) * (n + 1) && v[2].len == (Py_ssize_t)sizeof(int32_t) * (n + 1);
        ok = ok && v[4].len == (Py_ssize_t)sizeof(int32_t) * (n + 1) && v[14].len == (Py_ssize_t)sizeof(int32_t) * n;
        ok = ok && v[7].len == (Py_ssize_t)sizeof(double) * G * n && v[8].len == (Py_ssize_t)sizeof(double) * G * n;
        ok = ok && v[11].len == (Py_ssize_t)sizeof(double) * G && v[15].len == (Py_ssize_t)sizeof(double) * G;
        ok = ok && v[12].len == (Py_ssize_t)sizeof(double) * (n + 1) && v[13].len == (Py_ssize_t)sizeof(double) * (n + 1);
        ok = ok && v[16].len == (Py_ssize_t)sizeof(double);
        ok = ok && as[0] == 0 && ps[0] == 0 && ls[0] == 0;
        ok = ok && v[1].len == (Py_ssize_t)sizeof(int32_t) * as[n] && v[3].len == (Py_ssize_t)sizeof(int32_t) * ps[n];
        ok = ok && v[5].len == (Py_ssize_t)sizeof(int32_t) * ls[n] && v[6].len == (Py_ssize_t)sizeof(double) * ls[n];
        for (long k = 0; ok && k < n; ++k) ok = as[k] <= as[k + 1] && ps[k] <= ps[k + 1] && ls[k] <= ls[k + 1];
        const int32_t *al = v[1].buf, *pr = v[3].buf, *li = v[5].buf;
        for (int32_t x = 0; ok && x < as[n]; ++x) ok = al[x] >= 0 && al[x] < G;
        for (long k = 0; ok && k < n; ++k)
            for (int32_t x = ps[k]; ok && x < ps[k + 1]; ++x) ok = pr[x] >= 0 && pr[x] < k; /* placed before k */
        for (int32_t x = 0; ok && x < ls[n]; ++x) ok = li[x] >= 0 && li[x] < n;
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "groupsplit: arrays of the wrong size or content");
        } else {
            double *used = PyMem_Calloc((size_t)G, sizeof(double));
            if (used == NULL) {
                PyErr_NoMemory();
            } else {
                Split s = {(int)G, (int)n, as, al, ps, pr, ls, li, v[6].buf, v[7].buf, v[8].buf, v[9].buf, v[10].buf,
                           v[11].buf, v[12].buf, v[13].buf, ((const double *)v[16].buf)[0], target, visits, v[14].buf,
                           v[15].buf, used, leaf, expired, 0};
                for (long k = 0; k < n; ++k) s.side[k] = -1;
                for (long q = 0; q < G; ++q) s.now[q] = 0.0;
                branch(&s, 0);
                PyMem_Free(used);
                if (!s.error) out = PyLong_FromLong(s.visits);
            }
        }
    }
    for (int x = 0; x < got; ++x) PyBuffer_Release(&v[x]);
    return out;
}

static PyMethodDef methods[] = {
    {"split", py_split,
     METH_VARARGS,
     "split(allowed_start, allowed, pred_start, pred, link_start, link, link_bytes, cost, mem, outside, per_byte, "
     "weights, rest, rest_bytes, side, now, kind_memory, target, visits, leaf, expired) -> visits left (-1: cut short)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_groupsplit", "The joint polisher's group split in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__groupsplit(void) { return PyModule_Create(&module); }
