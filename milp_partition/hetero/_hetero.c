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

/* The buffers of objs[0..n-1], C-contiguous, those in [wlo, whi) writable, each at least need[i] bytes (name: the
   caller, for the message); returns how many were taken: n on success, fewer with a Python error set (the caller
   releases the ones taken with release_buffers). */
static int take_sized(PyObject *const *objs, Py_buffer *v, const Py_ssize_t *need, int n, int wlo, int whi, const char *name) {
    int got = 0;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(objs[got], &v[got], PyBUF_C_CONTIGUOUS | (got >= wlo && got < whi ? PyBUF_WRITABLE : 0)) < 0)
            return got;
        if (v[got].len < need[got]) {
            PyErr_Format(PyExc_ValueError, "%s: argument %d is smaller than expected", name, got);
            return got + 1;
        }
    }
    return got;
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

/* lambda_suffix(masks, w, out, bits, p, nk, T, L1): out[k][t][s0] (p + 1 x T x L1) = min over e of cost[k][t][s0][e] +
   out[k + 1][t][e], cost = the least w[t][c] over the configurations c masks[k][c][s0][e] allows (inf: none); out[p][t]
   = 0 at L1 - 1, inf elsewhere.  bits (None, or int64 p x L1 x L1): written with bit c of [k][s0][e] set where
   masks[k][c][s0][e] is.  The same single additions and minima as the numpy program (the same values): up to
   LAMBDA_TABLE_NK configurations, cost is read from a table of the least weight of every subset of configurations
   (the minimum of the same weights, the NaN ones never taken either way). */
#define LAMBDA_TABLE_NK 10
static PyObject *lambda_suffix(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[4];
    Py_ssize_t p, nk, T, L1;
    if (!PyArg_ParseTuple(args, "OOOOnnnn", &objs[0], &objs[1], &objs[2], &objs[3], &p, &nk, &T, &L1)) return NULL;
    if (p < 0 || nk < 0 || nk > 62 || T < 0 || L1 < 1) {
        PyErr_SetString(PyExc_ValueError, "lambda_suffix: bad sizes");
        return NULL;
    }
    int nb = objs[3] == Py_None ? 3 : 4;
    Py_buffer v[4];
    int got = take_buffers(objs, v, nb, 2);
    int rc = 0;
    double *cost = NULL, *table = NULL;
    Py_ssize_t *fin = NULL;
    int64_t *bits = NULL;
    const int use_table = nk <= LAMBDA_TABLE_NK;
    if (got < nb) {
        rc = -2;
    } else if (v[0].len < p * nk * L1 * L1 || v[1].len < T * nk * (Py_ssize_t)sizeof(double) ||
               v[2].len < (p + 1) * T * L1 * (Py_ssize_t)sizeof(double) ||
               (nb == 4 && v[3].len < p * L1 * L1 * (Py_ssize_t)sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "lambda_suffix: buffers too small");
        rc = -2;
    } else {
        const unsigned char *masks = (const unsigned char *)v[0].buf;
        const double *w = (const double *)v[1].buf;
        double *out = (double *)v[2].buf;
        const Py_ssize_t plane = L1 * L1, nsub = (Py_ssize_t)1 << (use_table ? nk : 0);
        for (Py_ssize_t i = 0; i < (p + 1) * T * L1; i++) out[i] = INFINITY;
        for (Py_ssize_t t = 0; t < T; t++) out[(p * T + t) * L1 + (L1 - 1)] = 0.0;
        /* the cost plane of a stage and weight vector (without the table), or the table of every subset's least weight */
        cost = use_table ? NULL : (double *)malloc(sizeof(double) * (size_t)(plane > 0 ? plane : 1));
        table = use_table ? (double *)malloc(sizeof(double) * (size_t)(T * nsub > 0 ? T * nsub : 1)) : NULL;
        fin = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)L1);
        bits = nb == 4 ? (int64_t *)v[3].buf : (int64_t *)malloc(sizeof(int64_t) * (size_t)(p * plane > 0 ? p * plane : 1));
        if ((use_table ? !table : !cost) || !fin || !bits) {
            PyErr_NoMemory();
            rc = -1;
        }
        if (!rc && use_table) {
            /* table[t][b] = the least w[t][c] over the bits c of b (inf for none): one weight added to a smaller subset */
            for (Py_ssize_t t = 0; t < T; t++) {
                double *tt = table + t * nsub;
                tt[0] = INFINITY;
                for (Py_ssize_t b = 1; b < nsub; b++) {
                    int c = __builtin_ctzll((unsigned long long)b);
                    double wc = w[t * nk + c], rest = tt[b & (b - 1)];
                    tt[b] = wc < rest ? wc : rest;
                }
            }
        }
        for (Py_ssize_t k = 0; k < p && !rc; k++) {
            int64_t *restrict bk = bits + k * plane;
            memset(bk, 0, sizeof(int64_t) * (size_t)plane);
            for (Py_ssize_t c = 0; c < nk; c++) {
                const unsigned char *restrict m = masks + (k * nk + c) * plane;
                for (Py_ssize_t i = 0; i < plane; i++) bk[i] |= (int64_t)(m[i] != 0) << c;
            }
        }
        for (Py_ssize_t k = p - 1; k >= 0 && !rc; k--) {
            const int64_t *bk = bits + k * plane;
            for (Py_ssize_t t = 0; t < T; t++) {
                const double *nxt = out + ((k + 1) * T + t) * L1;
                double *row = out + (k * T + t) * L1;
                Py_ssize_t nfin = 0;
                for (Py_ssize_t e = 0; e < L1; e++)
                    if (nxt[e] != INFINITY) fin[nfin++] = e;
                if (use_table) {
                    /* cost read from the table where it is added: the same sums and minima (an e with nxt[e] = inf
                       gives inf: the weights are finite or inf, never -inf; skipped) */
                    const double *tt = table + t * nsub;
                    for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                        double best = INFINITY;
                        const int64_t *brow = bk + s0 * L1;
                        for (Py_ssize_t f = 0; f < nfin; f++) {
                            double x = tt[brow[fin[f]]] + nxt[fin[f]];
                            if (x < best) best = x;
                        }
                        row[s0] = best;
                    }
                    continue;
                }
                for (Py_ssize_t i = 0; i < plane; i++) cost[i] = INFINITY;
                for (Py_ssize_t c = 0; c < nk; c++) {
                    double wc = w[t * nk + c];
                    const unsigned char *m = masks + (k * nk + c) * plane;
                    for (Py_ssize_t i = 0; i < plane; i++)
                        if (m[i] && wc < cost[i]) cost[i] = wc;
                }
                /* an e with nxt[e] = inf gives inf (the weights are finite or inf, never -inf): skipped */
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
    free(table);
    if (nb == 3) free(bits);
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

/* out[a] = min over n in [nlo, nhi] with a - n t0 >= 0 of g[a - n t0] + (d - n) t1 (inf where none), with scratch dq
   and y of at least width / t0 + 1 entries: two_use's loop (below; the tree's too).  t0 = 0: a - n t0 = a for every n,
   the least (d - n) t1 at n = nhi.  Otherwise per residue r of a modulo t0 a sliding-window minimum over k = j - n in
   [j - nhi, j - nlo] of y[k] = g[r + k t0] + k t1, kept with a monotone deque. */
static void two_use_core(const double *g, double *out, Py_ssize_t width, Py_ssize_t d, int t0, int t1, Py_ssize_t nlo,
                         Py_ssize_t nhi, Py_ssize_t *dq, double *y) {
    for (Py_ssize_t a = 0; a < width; a++) out[a] = INFINITY;
    if (nlo > nhi) return;
    if (!t0) {
        for (Py_ssize_t a = 0; a < width; a++) out[a] = g[a] + (double)t1 * (double)(d - nhi);
        return;
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
            if (tail > head) out[r + j * t0] = y[dq[head]] + (double)t1 * (double)(d - j);
        }
    }
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
        Py_ssize_t jmax = (t0 ? width / t0 : 0) + 1; /* two_use_core's scratch */
        Py_ssize_t *dq = (Py_ssize_t *)malloc(sizeof(Py_ssize_t) * (size_t)jmax);
        double *y = (double *)malloc(sizeof(double) * (size_t)jmax);
        if (!dq || !y) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            two_use_core(g, out, width, d, t0, t1, nlo, nhi, dq, y);
        }
        free(dq);
        free(y);
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
                        const double *restrict gm = gmax + e * B, *restrict gs = gsum + e * B;
                        double *restrict rmx = rmax, *restrict rsm = rsum;
                        /* the same comparisons as a conditional store, written as selects (vectorized) */
                        for (Py_ssize_t b = t; b < B; b++) {
                            double cm = ys > gm[b - t] ? ys : gm[b - t];
                            rmx[b] = cm < rmx[b] ? cm : rmx[b];
                            double cs = ys + gs[b - t];
                            rsm[b] = cs < rsm[b] ? cs : rsm[b];
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

/* The arguments of scan_core (stage_scan's, below). */
typedef struct {
    const double *cq, *aq, *uq, *arq;
    const int64_t *bits, *allowed;
    const double *ymax2, *ysum2, *bhere, *restsum, *restmax, *usage, *used, *sfx, *caps, *g, *nxt;
    const int64_t *twoq;
    Py_ssize_t s, last, nq, nt, l1, w, d, two;
    double ka, kb, mm1, floor_y, umax, armax, umin, ar_floor, value, keep, cap1;
} ScanArgs;

/* stage_scan's loop (its comment below) on raw arrays; dq and y: scratch of at least w + 1 entries where A->two. */
static void scan_core(const ScanArgs *A, const int64_t *ends, Py_ssize_t n, int64_t *cand, int64_t *cnt, double *minlb,
                      double *basemin, Py_ssize_t *dq, double *y) {
    for (Py_ssize_t idx = 0; idx < n; idx++) {
        Py_ssize_t e = (Py_ssize_t)ends[idx];
        int64_t k = 0;
        double best_lb = INFINITY, best_c = INFINITY;
        if (e <= A->s || e >= A->l1) {
            cnt[idx] = 0, minlb[idx] = best_lb, basemin[idx] = best_c;
            continue;
        }
        int64_t mask = A->allowed[e];
        double rs = A->restsum[e], rm = A->restmax[e];
        double base = rm >= A->floor_y ? rm : A->floor_y;
        for (Py_ssize_t q = 0; q < A->nq; q++) {
            if ((A->bits[q] & mask) != A->bits[q]) continue;
            double ci = A->cq[(q * A->l1 + A->s) * A->l1 + e];
            if (ci < best_c) best_c = ci;
            double av = A->last ? 0.0 : A->aq[q * A->l1 + e];
            double yi = ci + (A->ka * av + A->kb * A->bhere[q]);
            double big = A->ymax2[q] >= yi ? A->ymax2[q] : yi;
            if (base > big) big = base;
            double uqv = A->uq[q * A->l1 + A->s], arv = A->arq[(q * A->l1 + A->s) * A->l1 + e];
            double u = A->umax >= uqv ? A->umax : uqv;
            double ar = A->armax >= arv ? A->armax : arv;
            double lb = A->mm1 * big + A->ysum2[q] + yi + rs + (u >= A->umin ? u : A->umin) + (ar >= A->ar_floor ? ar : A->ar_floor);
            double lbk = lb * A->keep;
            if (lbk != lbk) lbk = -INFINITY;
            if (lbk < best_lb) best_lb = lbk;
            if (lb * A->keep >= A->value) continue;
            int ok = 1;
            for (Py_ssize_t t = 0; t < A->nt && ok; t++)
                if (!((A->usage[q * A->nt + t] + A->used[t]) + A->sfx[t * A->l1 + e] <= A->caps[t])) ok = 0;
            if (ok && A->two) {
                const int64_t *tq = A->twoq + 4 * q;
                ok = two_use_fits(A->g, A->nxt + e * A->w, A->cap1, A->w, A->d, (int)tq[0], (int)tq[1], (Py_ssize_t)tq[2],
                                  (Py_ssize_t)tq[3], dq, y);
            }
            if (ok) cand[idx * A->nq + k++] = (int64_t)q;
        }
        cnt[idx] = k, minlb[idx] = best_lb, basemin[idx] = best_c;
    }
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
    int got = take_sized(o, v, need, NB, 16, 20, "stage_scan"), rc = got < NB ? -1 : 0; /* got: the buffers held */
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
        ScanArgs sa = {cq, aq, uq, arq, bits, allowed, ymax2, ysum2, bhere, restsum, restmax, usage, used, sfx, caps, g, nxt,
                       twoq, s, last, nq, nt, l1, w, d, two, ka, kb, mm1, floor_y, umax, armax, umin, ar_floor, value, keep, cap1};
        scan_core(&sa, ends, n, cand, cnt, minlb, basemin, dq, y);
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
                            const double *restrict grow = g + e * B1;
                            double *restrict hr = hrow;
                            /* the same comparisons as a conditional store, written as selects (vectorized) */
                            for (Py_ssize_t b = t; b < B1; b++) {
                                double x = grow[b - t];
                                double m = a > x ? a : x;
                                hr[b] = m < hr[b] ? m : hr[b];
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

/* NaN-propagating minimum and maximum: numpy's np.minimum / np.maximum (and its min reductions) on two values. */
static inline double nan_min(double a, double b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
static inline double nan_max(double a, double b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }

/* span_dp(masks, ylb, ymin, inc_a, inc_b, ka, kb, nmax, nsum, in_max, in_sum, lat_max, lat_sum, P, nk, L1): the crossing
   programs of search.py's _Triple.span_tables (its numpy form is the definition): for k = P - 1 .. 1, with
   m[c][s0][e] = ylb[k][c][s0][e] where masks[k][c][s0][e] (uint8) else inf, yin = min_c (m + kb[k] inc_b[c][s0]),
   yout = min_c (m + ka[k] inc_a[c][e]), y = ymin[k]:
     in_max[k][s0]  = min_e max(yin, nmax[k+1][e]),            in_sum[k][s0]  = min_e (yin + nsum[k+1][e]),
     lat_max[k][s0] = min_e min(max(y, lat_max[k+1][e]), max(yout, in_max[k+1][e])),
     lat_sum[k][s0] = min_e min(y + lat_sum[k+1][e], yout + in_sum[k+1][e]);
   the outputs ((P + 1) x L1) come filled with inf (rows 0 and P stay).  The same sums and products per entry, minima and
   maxima that propagate NaN as numpy's do, so the same values.  A last argument upper (optional, 0) says that ylb and
   ymin are inf wherever e <= s0 (a stage holds a layer at least; as the search's tables are): entries there that leave
   every minimum as it is are then not read. */
static PyObject *span_dp(PyObject *self, PyObject *args) {
    (void)self;
    enum { NB = 13 };
    PyObject *o[NB];
    Py_ssize_t P, nk, L1;
    int upper = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOnnn|p", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9],
                          &o[10], &o[11], &o[12], &P, &nk, &L1, &upper))
        return NULL;
    if (P < 1 || nk < 0 || L1 < 1) {
        PyErr_SetString(PyExc_ValueError, "span_dp: bad sizes");
        return NULL;
    }
    const Py_ssize_t need[NB] = {P * nk * L1 * L1,     P * nk * L1 * L1 * 8, P * L1 * L1 * 8, nk * L1 * 8, nk * L1 * 8,
                                 P * 8,                P * 8,                (P + 1) * L1 * 8, (P + 1) * L1 * 8,
                                 (P + 1) * L1 * 8,     (P + 1) * L1 * 8,     (P + 1) * L1 * 8, (P + 1) * L1 * 8};
    Py_buffer v[NB];
    int got = take_sized(o, v, need, NB, 9, NB, "span_dp"), rc = got < NB ? -1 : 0;
    if (!rc) {
        const uint8_t *masks = (const uint8_t *)v[0].buf;
        const double *ylb = (const double *)v[1].buf, *ymin = (const double *)v[2].buf;
        const double *inc_a = (const double *)v[3].buf, *inc_b = (const double *)v[4].buf;
        const double *ka = (const double *)v[5].buf, *kb = (const double *)v[6].buf;
        const double *nmax = (const double *)v[7].buf, *nsum = (const double *)v[8].buf;
        double *in_max = (double *)v[9].buf, *in_sum = (double *)v[10].buf;
        double *lat_max = (double *)v[11].buf, *lat_sum = (double *)v[12].buf;
        const Py_ssize_t plane = L1 * L1;
        double *yin_k = (double *)malloc(sizeof(double) * (size_t)plane);
        double *yout_k = (double *)malloc(sizeof(double) * (size_t)plane);
        if (!yin_k || !yout_k) {
            PyErr_NoMemory();
            rc = -1;
            P = 0; /* no work: the buffers are freed and released below */
        }
        for (Py_ssize_t k = P - 1; k >= 1; k--) {
            const double a_k = ka[k], b_k = kb[k];
            const double *nmx = nmax + (k + 1) * L1, *nsm = nsum + (k + 1) * L1;
            const double *imx = in_max + (k + 1) * L1, *ism = in_sum + (k + 1) * L1;
            const double *lmx = lat_max + (k + 1) * L1, *lsm = lat_sum + (k + 1) * L1;
            /* yin, yout over the configurations first (each configuration's plane in order: the same minima).  A
               masked entry adds inf + the increment: inf when every increment of the configuration is neither NaN nor
               -inf (checked), and then it leaves the minimum as it is (NaN stays NaN): skipped. */
            for (Py_ssize_t i = 0; i < plane; i++) yin_k[i] = INFINITY, yout_k[i] = INFINITY;
            int all_tame = 1; /* every configuration's increments tame: with upper, yin and yout stay inf at e <= s0 */
            for (Py_ssize_t c = 0; c < nk; c++) {
                const double *y = ylb + (k * nk + c) * plane, *ia = inc_a + c * L1, *ib = inc_b + c * L1;
                const uint8_t *m = masks + (k * nk + c) * plane;
                int tame = 1;
                for (Py_ssize_t j = 0; j < L1 && tame; j++) {
                    double xb = b_k * ib[j], xa = a_k * ia[j];
                    tame = xb == xb && xa == xa && xb != -INFINITY && xa != -INFINITY;
                }
                all_tame &= tame;
                for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                    const double bin = b_k * ib[s0];
                    /* upper: ylb is inf at e <= s0, where a tame increment leaves both minima as they are */
                    for (Py_ssize_t e = upper && tame ? s0 + 1 : 0; e < L1; e++) {
                        Py_ssize_t i = s0 * L1 + e;
                        if (!m[i] && tame) continue;
                        double mv = m[i] ? y[i] : INFINITY;
                        yin_k[i] = nan_min(yin_k[i], mv + bin);
                        yout_k[i] = nan_min(yout_k[i], mv + a_k * ia[e]);
                    }
                }
            }
            /* an (s0, e) with yin, yout and y all inf adds nothing to the four minima when the next rows hold no NaN
               and the sums' rows no -inf (checked): inf or larger in every term; skipped */
            int tame_rows = 1;
            for (Py_ssize_t e = 0; e < L1 && tame_rows; e++)
                tame_rows = nmx[e] == nmx[e] && imx[e] == imx[e] && lmx[e] == lmx[e] && nsm[e] == nsm[e] && ism[e] == ism[e] &&
                            lsm[e] == lsm[e] && nsm[e] != -INFINITY && ism[e] != -INFINITY && lsm[e] != -INFINITY;
            for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                double b_in_max = INFINITY, b_in_sum = INFINITY, b_lat_max = INFINITY, b_lat_sum = INFINITY;
                /* upper and every increment tame: yin, yout and y (ymin, inf where ylb is) are inf at e <= s0: skipped
                   there as below */
                for (Py_ssize_t e = upper && all_tame && tame_rows ? s0 + 1 : 0; e < L1; e++) {
                    double yin = yin_k[s0 * L1 + e], yout = yout_k[s0 * L1 + e];
                    double y = ymin[k * plane + s0 * L1 + e];
                    if (tame_rows && yin == INFINITY && yout == INFINITY && y == INFINITY) continue;
                    b_in_max = nan_min(b_in_max, nan_max(yin, nmx[e]));
                    b_in_sum = nan_min(b_in_sum, yin + nsm[e]);
                    b_lat_max = nan_min(b_lat_max, nan_min(nan_max(y, lmx[e]), nan_max(yout, imx[e])));
                    b_lat_sum = nan_min(b_lat_sum, nan_min(y + lsm[e], yout + ism[e]));
                }
                in_max[k * L1 + s0] = b_in_max, in_sum[k * L1 + s0] = b_in_sum;
                lat_max[k * L1 + s0] = b_lat_max, lat_sum[k * L1 + s0] = b_lat_sum;
            }
        }
        free(yin_k);
        free(yout_k);
    }
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* bottleneck(ylb, masks, rmax, rsum, ymin, P, nk, L1): search.py's _bottleneck_arr (its numpy form is the definition):
   ymin[k][s0][e] = min_c (ylb[k][c][s0][e] where masks[k][c][s0][e] (uint8) else inf); with rmax[P][L] = -inf,
   rsum[P][L] = 0 (inf elsewhere in row P), for k = P - 1 .. 0: rmax[k][s0] = min_e max(ymin[k][s0][e], rmax[k+1][e]),
   rsum[k][s0] = min_e (ymin[k][s0][e] + rsum[k+1][e]).  The minima and maxima propagate NaN as numpy's do and the sums
   are single additions: the same values.  A last argument upper (optional, 0) says that ylb is inf wherever e <= s0:
   entries there that leave every minimum as it is are then not read. */
static PyObject *bottleneck(PyObject *self, PyObject *args) {
    (void)self;
    enum { NB = 5 };
    PyObject *o[NB];
    Py_ssize_t P, nk, L1;
    int upper = 0;
    if (!PyArg_ParseTuple(args, "OOOOOnnn|p", &o[0], &o[1], &o[2], &o[3], &o[4], &P, &nk, &L1, &upper)) return NULL;
    if (P < 0 || nk < 0 || L1 < 1) {
        PyErr_SetString(PyExc_ValueError, "bottleneck: bad sizes");
        return NULL;
    }
    const Py_ssize_t need[NB] = {P * nk * L1 * L1 * 8, P * nk * L1 * L1, (P + 1) * L1 * 8, (P + 1) * L1 * 8, P * L1 * L1 * 8};
    Py_buffer v[NB];
    int got = take_sized(o, v, need, NB, 2, NB, "bottleneck"), rc = got < NB ? -1 : 0;
    if (!rc) {
        const double *ylb = (const double *)v[0].buf;
        const uint8_t *masks = (const uint8_t *)v[1].buf;
        double *rmax = (double *)v[2].buf, *rsum = (double *)v[3].buf, *ymin = (double *)v[4].buf;
        const Py_ssize_t plane = L1 * L1;
        for (Py_ssize_t i = 0; i < (P + 1) * L1; i++) rmax[i] = INFINITY, rsum[i] = INFINITY;
        rmax[P * L1 + L1 - 1] = -INFINITY, rsum[P * L1 + L1 - 1] = 0.0;
        for (Py_ssize_t k = 0; k < P; k++) {
            double *ym = ymin + k * plane;
            for (Py_ssize_t i = 0; i < plane; i++) ym[i] = INFINITY;
            for (Py_ssize_t c = 0; c < nk; c++) {
                const double *y = ylb + (k * nk + c) * plane;
                const uint8_t *m = masks + (k * nk + c) * plane;
                /* a masked entry's inf leaves the minimum as it is (NaN stays NaN): skipped; upper: so is every
                   entry at e <= s0 (ylb is inf there) */
                if (upper) {
                    for (Py_ssize_t s0 = 0; s0 < L1; s0++)
                        for (Py_ssize_t i = s0 * L1 + s0 + 1; i < (s0 + 1) * L1; i++)
                            if (m[i]) ym[i] = nan_min(ym[i], y[i]);
                } else {
                    for (Py_ssize_t i = 0; i < plane; i++)
                        if (m[i]) ym[i] = nan_min(ym[i], y[i]);
                }
            }
        }
        for (Py_ssize_t k = P - 1; k >= 0; k--) {
            const double *ym = ymin + k * plane, *nmx = rmax + (k + 1) * L1, *nsm = rsum + (k + 1) * L1;
            /* y = inf adds inf to both minima when the next rows hold no NaN and the sums' no -inf (checked): skipped */
            int tame = 1;
            for (Py_ssize_t e = 0; e < L1 && tame; e++) tame = nmx[e] == nmx[e] && nsm[e] == nsm[e] && nsm[e] != -INFINITY;
            for (Py_ssize_t s0 = 0; s0 < L1; s0++) {
                double bmax = INFINITY, bsum = INFINITY;
                /* upper: ymin is inf at e <= s0 (ylb is), skipped there when tame as below */
                for (Py_ssize_t e = upper && tame ? s0 + 1 : 0; e < L1; e++) {
                    double y = ym[s0 * L1 + e];
                    if (tame && y == INFINITY) continue;
                    bmax = nan_min(bmax, nan_max(y, nmx[e]));
                    bsum = nan_min(bsum, y + nsm[e]);
                }
                rmax[k * L1 + s0] = bmax, rsum[k * L1 + s0] = bsum;
            }
        }
    }
    release_buffers(v, got);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* ---- tree_run: the search's tree of one (mbs, D, P) in C (search.py, _Triple.rec, whose Python form is the
   definition).  The same double operations in the same order as rec, scan, span_lb, past_room, level_of, level_fits,
   dominated and prev_arrays; what rec asks Python for (a pair row of the previous set, a cap level's tables, a leaf,
   the clock, the device floors, the Lagrangian rows) is asked through callbacks, at the same points.  So the same
   nodes, the same pruning and the same leaves as the Python loop (the tests compare both). ---- */

/* The dominance memo of _Triple.dominated: key (next stage, next layer, last set, sorted sets) -> the accumulated
   terms of the partial plans kept under it (6 doubles each). */
typedef struct {
    uint64_t h;
    Py_ssize_t koff;
    int klen, nv, cap;
    double *vals;
} MemoEntry;

typedef struct {
    MemoEntry *tab;
    size_t size, used;
    int32_t *keys;
    size_t kused, kcap;
} Memo;

#define MEMO_VALS 6

static uint64_t memo_hash(const int32_t *k, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)k[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 31);
}

static void memo_free(Memo *mm) {
    if (mm->tab)
        for (size_t i = 0; i < mm->size; i++) free(mm->tab[i].vals);
    free(mm->tab);
    free(mm->keys);
    memset(mm, 0, sizeof(*mm));
}

static int memo_grow(Memo *mm) {
    size_t nsize = mm->size ? mm->size * 2 : 4096;
    MemoEntry *nt = (MemoEntry *)calloc(nsize, sizeof(MemoEntry));
    if (!nt) return -1;
    for (size_t i = 0; i < mm->size; i++) {
        MemoEntry *e = &mm->tab[i];
        if (!e->vals) continue;
        size_t j = (size_t)e->h & (nsize - 1);
        while (nt[j].vals) j = (j + 1) & (nsize - 1);
        nt[j] = *e;
    }
    free(mm->tab);
    mm->tab = nt;
    mm->size = nsize;
    return 0;
}

/* 1: a partial plan under this key is no worse in every term (dominated); 0: not (vals kept, the ones it dominates
   dropped); -1: out of memory.  NaN compares false, as in Python. */
static int memo_dominated(Memo *mm, const int32_t *key, int klen, const double *vals) {
    if ((mm->used + 1) * 2 > mm->size && memo_grow(mm) < 0) return -1;
    uint64_t h = memo_hash(key, klen);
    size_t j = (size_t)h & (mm->size - 1);
    for (;;) {
        MemoEntry *e = &mm->tab[j];
        if (!e->vals) break;
        if (e->h == h && e->klen == klen && !memcmp(mm->keys + e->koff, key, sizeof(int32_t) * (size_t)klen)) {
            for (int v = 0; v < e->nv; v++) {
                const double *old = e->vals + MEMO_VALS * v;
                int all = 1;
                for (int t = 0; t < MEMO_VALS && all; t++)
                    if (!(old[t] <= vals[t])) all = 0;
                if (all) return 1;
            }
            int w = 0;
            for (int v = 0; v < e->nv; v++) {
                const double *old = e->vals + MEMO_VALS * v;
                int all = 1;
                for (int t = 0; t < MEMO_VALS && all; t++)
                    if (!(vals[t] <= old[t])) all = 0;
                if (!all) {
                    if (w != v) memcpy(e->vals + MEMO_VALS * w, old, sizeof(double) * MEMO_VALS);
                    w++;
                }
            }
            e->nv = w;
            if (e->nv == e->cap) {
                int ncap = e->cap * 2;
                double *nv = (double *)realloc(e->vals, sizeof(double) * MEMO_VALS * (size_t)ncap);
                if (!nv) return -1;
                e->vals = nv, e->cap = ncap;
            }
            memcpy(e->vals + MEMO_VALS * e->nv, vals, sizeof(double) * MEMO_VALS);
            e->nv++;
            return 0;
        }
        j = (j + 1) & (mm->size - 1);
    }
    if (mm->kused + (size_t)klen > mm->kcap) {
        size_t ncap = mm->kcap ? mm->kcap * 2 : 65536;
        while (ncap < mm->kused + (size_t)klen) ncap *= 2;
        int32_t *nk = (int32_t *)realloc(mm->keys, sizeof(int32_t) * ncap);
        if (!nk) return -1;
        mm->keys = nk, mm->kcap = ncap;
    }
    double *v = (double *)malloc(sizeof(double) * MEMO_VALS * 2);
    if (!v) return -1;
    memcpy(mm->keys + mm->kused, key, sizeof(int32_t) * (size_t)klen);
    MemoEntry *e = &mm->tab[j];
    e->h = h, e->koff = (Py_ssize_t)mm->kused, e->klen = klen, e->vals = v, e->nv = 1, e->cap = 2;
    memcpy(v, vals, sizeof(double) * MEMO_VALS);
    mm->kused += (size_t)klen;
    mm->used++;
    return 0;
}

#define TREE_LEVELS 32

typedef struct {
    int P, L1, Q, NT, W, two, span, lag, sound, balanced, todo;
    Py_ssize_t d;
    long long m;
    double mm1, keep, value, floor_y, ar_floor, umin, tmin, xmin_all, cminpre_L, cap1, y_cap_masks;
    long long nodes, ticks, triple_nodes, node_cap, nodes0, ystar_after, level_after, tick, entries, entry_tick;
    const double *cq, *aq, *uq, *arq, *usage, *caps_tol, *lam_cap, *rmax, *rsum, *suffix, *two_np, *ka, *kb;
    const int64_t *bits, *allowed, *twoq, *set_region;
    const int8_t *two_none;
    const double *in_max, *in_sum, *lat_max, *lat_sum, *acr;
    int nlev;
    double lev_cap[TREE_LEVELS];
    int lev_built[TREE_LEVELS];
    PyObject *lev_obj[TREE_LEVELS];
    Py_buffer lev_buf[TREE_LEVELS][2];
    int lev_nbuf[TREE_LEVELS];
    const double **pair;          /* per (previous set, first layer): its row in pair_tab once read */
    const double *pair_tab;       /* [qp][s][2 Q]: the rows (a then b) Python has computed, shared by the triples */
    const uint8_t *pair_have;     /* [qp][s]: 1 where pair_tab holds the row */
    PyObject *cb_pair, *cb_level, *cb_leaf, *cb_expired, *cb_raise, *cb_lag;
    int *ch_s, *ch_e, *ch_q, *span_stack;
    double *ymax2, *ysum2, *bhere, *used, *g, *minlb, *basemin, *yscr;
    int64_t *cand, *cnt, *ends;
    Py_ssize_t *dq;
    int32_t *key;
    Memo memo;
    int stop, abort, err;
} Tree;

static int tree_expired(Tree *T) {
    PyObject *r = PyObject_CallNoArgs(T->cb_expired);
    if (!r) {
        T->err = 1;
        return 1;
    }
    int x = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (x < 0) T->err = 1;
    return x != 0;
}

/* A buffer of at least need doubles (C-contiguous) from obj; 0 or -1 (error set). */
static int tree_buffer(PyObject *obj, Py_buffer *v, Py_ssize_t need, const char *what) {
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (v->len < need * (Py_ssize_t)sizeof(double)) {
        PyBuffer_Release(v);
        PyErr_Format(PyExc_ValueError, "tree_run: %s is smaller than expected", what);
        return -1;
    }
    return 0;
}

/* prev_arrays' pair row (a_{i-1}, b_i per set) of the previous set qp from layer s: 2 Q doubles of pair_tab (the
   callback computes a row not there yet into it), or NULL with a Python error; *fresh: whether Python computed it now
   (pair_row) */
static const double *tree_pair(Tree *T, int qp, int s, int *fresh) {
    const Py_ssize_t at = (Py_ssize_t)qp * T->L1 + s;
    const double **slot = &T->pair[at];
    *fresh = 0;
    if (*slot) return *slot;
    if (!T->pair_have[at]) {
        /* the callback computes the row into pair_tab (and says whether it was computed now) */
        PyObject *r = PyObject_CallFunction(T->cb_pair, "ii", qp, s);
        if (!r) return NULL;
        int ok = PyArg_ParseTuple(r, "p", fresh);
        Py_DECREF(r);
        if (!ok) return NULL;
        if (!T->pair_have[at]) {
            PyErr_SetString(PyExc_RuntimeError, "tree_run: the pair callback did not fill its row");
            return NULL;
        }
    }
    *slot = T->pair_tab + at * 2 * (Py_ssize_t)T->Q;
    return *slot;
}

static int tree_past_room(const Tree *T, double base_min_c, double armax) {
    return !T->balanced && T->tmin >= 0 && isfinite(base_min_c) &&
           T->mm1 * (base_min_c + T->xmin_all) + T->cminpre_L + T->umin + armax > T->value;
}

static int tree_level_of(const Tree *T, double room) {
    int best = -1;
    for (int j = 0; j < T->nlev; j++) {
        if (T->lev_cap[j] * (1 - 1e-9) >= room)
            best = j;
        else
            break;
    }
    return best;
}

static int tree_level_check(const Tree *T, int j, int k, int e, const double *used2, const double *g2) {
    const double *sfx = (const double *)T->lev_buf[j][0].buf;
    for (int t = 0; t < T->NT; t++)
        if (used2[t] + sfx[((Py_ssize_t)k * T->NT + t) * T->L1 + e] > T->lam_cap[t] * (1 + 1e-12)) return 0;
    if (T->two) {
        const double *nxt = (const double *)T->lev_buf[j][1].buf + ((Py_ssize_t)k * T->L1 + e) * T->W;
        double best = INFINITY;
        for (Py_ssize_t a = 0; a < T->W; a++) {
            double x = g2[a] + nxt[T->W - 1 - a];
            if (x < best) best = x;
        }
        if (best > T->cap1) return 0;
    }
    return 1;
}

/* level_fits: 1 fits, 0 not, -1 error */
static int tree_level_fits(Tree *T, int j, int k, int e, const double *used2, const double *g2) {
    if (!T->lev_built[j]) {
        for (int jj = j - 1; jj >= 0; jj--)
            if (T->lev_built[jj]) {
                if (!tree_level_check(T, jj, k, e, used2, g2)) return 0;
                break;
            }
        PyObject *r = PyObject_CallFunction(T->cb_level, "i", j);
        if (!r) return -1;
        PyObject *sfx = NULL, *two = NULL;
        if (!PyArg_ParseTuple(r, "OO", &sfx, &two)) {
            Py_DECREF(r);
            return -1;
        }
        T->lev_obj[j] = r; /* holds the arrays while their buffers are read */
        if (tree_buffer(sfx, &T->lev_buf[j][0], (Py_ssize_t)(T->P + 1) * T->NT * T->L1, "a level's suffix") < 0) return -1;
        T->lev_nbuf[j] = 1;
        if (T->two) {
            if (tree_buffer(two, &T->lev_buf[j][1], (Py_ssize_t)(T->P + 1) * T->L1 * T->W, "a level's table") < 0) return -1;
            T->lev_nbuf[j] = 2;
        }
        T->lev_built[j] = 1;
    }
    return tree_level_check(T, j, k, e, used2, g2);
}

static double tree_span_lb(const Tree *T, int i, int e, double ci, double a_here, double b_here, double ymax2, double ysum2,
                           double restmax, double restsum, double u, double ar) {
    double ka = T->ka[i], kb = T->kb[i];
    double tail = (u >= T->umin ? u : T->umin) + (ar >= T->ar_floor ? ar : T->ar_floor);
    Py_ssize_t at = (Py_ssize_t)(i + 1) * T->L1 + e;
    double acr = T->acr[e];
    double y1 = ci + (ka * (acr > a_here ? acr : a_here) + kb * b_here);
    double base1 = restmax;
    if (T->in_max[at] > base1) base1 = T->in_max[at];
    if (T->floor_y > base1) base1 = T->floor_y;
    if (ymax2 > base1) base1 = ymax2;
    if (y1 > base1) base1 = y1;
    double lb1 = T->mm1 * base1 + ysum2 + y1 + (T->in_sum[at] > restsum ? T->in_sum[at] : restsum) + tail;
    double y2 = ci + (ka * a_here + kb * b_here);
    double base2 = restmax;
    if (T->lat_max[at] > base2) base2 = T->lat_max[at];
    if (T->floor_y > base2) base2 = T->floor_y;
    if (ymax2 > base2) base2 = ymax2;
    if (y2 > base2) base2 = y2;
    double lb2 = T->mm1 * base2 + ysum2 + y2 + (T->lat_sum[at] > restsum ? T->lat_sum[at] : restsum) + tail;
    return lb1 < lb2 ? lb1 : lb2;
}

static void tree_leaf(Tree *T, int depth, double lb) {
    PyObject *lst = PyList_New(depth);
    if (!lst) {
        T->err = 1;
        return;
    }
    for (int k = 0; k < depth; k++) {
        PyObject *t = Py_BuildValue("(iii)", T->ch_s[k], T->ch_e[k], T->ch_q[k]);
        if (!t) {
            Py_DECREF(lst);
            T->err = 1;
            return;
        }
        PyList_SET_ITEM(lst, k, t);
    }
    PyObject *r = PyObject_CallFunction(T->cb_leaf, "Od", lst, lb);
    Py_DECREF(lst);
    if (!r) {
        T->err = 1;
        return;
    }
    double value;
    int stop;
    if (!PyArg_ParseTuple(r, "dp", &value, &stop)) T->err = 1;
    else
        T->value = value, T->stop = T->stop || stop;
    Py_DECREF(r);
}

static int tree_raise(Tree *T) {
    PyObject *r = PyObject_CallNoArgs(T->cb_raise);
    if (!r) return -1;
    PyObject *caps = NULL;
    double fy, af;
    if (!PyArg_ParseTuple(r, "ddO", &fy, &af, &caps)) {
        Py_DECREF(r);
        return -1;
    }
    Py_ssize_t n = PySequence_Size(caps);
    if (n < 0 || n > TREE_LEVELS) {
        Py_DECREF(r);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "tree_run: too many cap levels");
        return -1;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *x = PySequence_GetItem(caps, j);
        if (!x) {
            Py_DECREF(r);
            return -1;
        }
        T->lev_cap[j] = PyFloat_AsDouble(x);
        Py_DECREF(x);
    }
    T->nlev = (int)n;
    T->floor_y = fy, T->ar_floor = af, T->todo = 0;
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

static void tree_rec(Tree *T, int i, int s, double ymax, double ysum, double c_prev, double b_prev, double umax, double armax) {
    if (T->stop || T->abort || T->err) return;
    const int P = T->P, L1 = T->L1, L = L1 - 1, Q = T->Q, NT = T->NT, rest = P - i - 1, last = i == P - 1;
    const Py_ssize_t W = T->W;
    const double ka = T->ka[i], kb = T->kb[i], mm1 = T->mm1, keep = T->keep, umin = T->umin;
    double *ymax2 = T->ymax2 + (Py_ssize_t)i * Q, *ysum2 = T->ysum2 + (Py_ssize_t)i * Q, *bhere = T->bhere + (Py_ssize_t)i * Q;
    const double *used = T->used + (Py_ssize_t)i * NT, *g_used = T->g + (Py_ssize_t)i * W;
    int fresh = 0;
    const double *row = NULL;
    if (i > 0) {
        row = tree_pair(T, T->ch_q[i - 1], s, &fresh);
        if (!row) {
            T->err = 1;
            return;
        }
    }
    /* rec's clock: every entry_tick calls and where the pair row is new */
    if (++T->entries >= T->entry_tick || fresh) {
        T->entries = 0;
        if (tree_expired(T)) {
            if (!T->err) T->stop = 1;
            return;
        }
    }
    if (i == 0) {
        for (int q = 0; q < Q; q++) ymax2[q] = ymax, ysum2[q] = ysum, bhere[q] = 0.0;
    } else {
        const int first = i - 1 == 0, single = P <= 3 || T->sound;
        for (int q = 0; q < Q; q++) {
            double a = row[q];
            double x = first ? (single ? a : 2 * a) : a + b_prev;
            double yp = c_prev + x;
            ymax2[q] = ymax >= yp ? ymax : yp;
            ysum2[q] = ysum + yp;
            bhere[q] = row[Q + q];
        }
    }
    if (T->todo && T->nodes - T->nodes0 > T->ystar_after && tree_raise(T) < 0) {
        T->err = 1;
        return;
    }
    const double floor_y = T->floor_y, ar_floor = T->ar_floor;
    const int use_levels = T->m > 1 && 0 < T->y_cap_masks && T->y_cap_masks < INFINITY && T->nodes - T->nodes0 > T->level_after;
    int64_t *ends = T->ends + (Py_ssize_t)i * L1;
    Py_ssize_t n = 0;
    if (rest)
        for (int x = s + 1; x < L - rest + 1; x++) ends[n++] = x;
    else
        ends[n++] = L;
    if (T->balanced && rest) { /* nearest the even split first; a stable sort, as Python's */
        double aim = s + (double)(L - s) / (rest + 1);
        for (Py_ssize_t a = 1; a < n; a++) {
            int64_t x = ends[a];
            double kx = fabs((double)x - aim);
            Py_ssize_t b = a - 1;
            while (b >= 0 && fabs((double)ends[b] - aim) > kx) ends[b + 1] = ends[b], b--;
            ends[b + 1] = x;
        }
    }
    /* the later stages' least sum of y: the Lagrangian rows (per end and set) or the bottleneck program's */
    PyObject *lagobj = NULL;
    Py_buffer lagbuf[2];
    int nlag = 0;
    const double *rs_row = T->rsum + (Py_ssize_t)(i + 1) * L1, *lag_b = NULL;
    if (rest && T->lag) {
        PyObject *ul = PyList_New(NT);
        if (!ul) {
            T->err = 1;
            return;
        }
        for (int t = 0; t < NT; t++) PyList_SET_ITEM(ul, t, PyFloat_FromDouble(used[t]));
        lagobj = PyObject_CallFunction(T->cb_lag, "iO", i, ul);
        Py_DECREF(ul);
        PyObject *lb_o = NULL, *rs_o = NULL;
        if (!lagobj || !PyArg_ParseTuple(lagobj, "OO", &lb_o, &rs_o) || tree_buffer(lb_o, &lagbuf[0], (Py_ssize_t)L1 * Q, "lag rows") < 0) {
            Py_XDECREF(lagobj);
            T->err = 1;
            return;
        }
        nlag = 1;
        if (tree_buffer(rs_o, &lagbuf[1], L1, "lag sums") < 0) {
            PyBuffer_Release(&lagbuf[0]);
            Py_DECREF(lagobj);
            T->err = 1;
            return;
        }
        nlag = 2;
        lag_b = (const double *)lagbuf[0].buf;
        rs_row = (const double *)lagbuf[1].buf;
    }
    int64_t *cand = T->cand + (Py_ssize_t)i * L1 * Q, *cnt = T->cnt + (Py_ssize_t)i * L1;
    double *minlb = T->minlb + (Py_ssize_t)i * L1, *basemin = T->basemin + (Py_ssize_t)i * L1;
    {
        ScanArgs sa = {T->cq, T->aq, T->uq, T->arq, T->bits, T->allowed + ((Py_ssize_t)i * L1 + s) * L1, ymax2, ysum2, bhere,
                       rs_row, T->rmax + (Py_ssize_t)(i + 1) * L1, T->usage, used, T->suffix + (Py_ssize_t)(i + 1) * NT * L1,
                       T->caps_tol, g_used, T->two ? T->two_np + (Py_ssize_t)(i + 1) * L1 * W : NULL, T->twoq, s, last, Q,
                       NT, L1, W, T->d, T->two, ka, kb, mm1, floor_y, umax, armax, umin, ar_floor, T->value, keep, T->cap1};
        scan_core(&sa, ends, n, cand, cnt, minlb, basemin, T->dq, T->yscr);
    }
    const int status = T->span_stack[i];
    double *used2 = T->used + (Py_ssize_t)(i + 1) * NT, *g2 = T->g + (Py_ssize_t)(i + 1) * W;
    for (Py_ssize_t idx = 0; idx < n; idx++) {
        const int e = (int)ends[idx];
        T->nodes++, T->ticks++, T->triple_nodes++;
        if (T->node_cap >= 0 && T->triple_nodes > T->node_cap) {
            T->abort = 1;
            goto done;
        }
        if (T->ticks >= T->tick) {
            T->ticks = 0;
            if (tree_expired(T)) {
                if (!T->err) T->stop = 1;
                goto done;
            }
        }
        if (T->two && rest && T->two_none[(Py_ssize_t)(i + 1) * L1 + e]) continue;
        const int64_t k = cnt[idx], *kept = cand + idx * Q;
        if (!k) {
            if (minlb[idx] >= T->value && tree_past_room(T, basemin[idx], armax)) break;
            continue;
        }
        const double restsum_e = rs_row[e], restmax = T->rmax[(Py_ssize_t)(i + 1) * L1 + e];
        const double base = restmax >= floor_y ? restmax : floor_y;
        double value = T->value;
        const int any_ok = minlb[idx] < value;
        const double base_min_c = basemin[idx];
        for (int64_t kk = 0; kk < k; kk++) {
            const int qi = (int)kept[kk];
            const Py_ssize_t qse = ((Py_ssize_t)qi * L1 + s) * L1 + e;
            const double ci = T->cq[qse], a_here = last ? 0.0 : T->aq[(Py_ssize_t)qi * L1 + e];
            const double u_q = T->uq[(Py_ssize_t)qi * L1 + s], ar_q = T->arq[qse];
            const double ym2 = ymax2[qi], ys2 = ysum2[qi], b_here = bhere[qi];
            double restsum = restsum_e;
            if (lag_b && lag_b[(Py_ssize_t)e * Q + qi] > restsum) restsum = lag_b[(Py_ssize_t)e * Q + qi];
            const double yi = ci + (ka * a_here + kb * b_here);
            double big = ym2 >= yi ? ym2 : yi;
            if (base > big) big = base;
            const double u = umax >= u_q ? umax : u_q;
            const double ar = armax >= ar_q ? armax : ar_q;
            const double lb = mm1 * big + ys2 + yi + restsum + (u >= umin ? u : umin) + (ar >= ar_floor ? ar : ar_floor);
            if (lb * keep >= value) continue;
            int region = -1;
            if (T->span) {
                int sr = (int)T->set_region[qi];
                region = (status == -2 || status == sr) ? sr : -1;
            }
            if (region >= 0 &&
                (rest == 0 || tree_span_lb(T, i, e, ci, a_here, b_here, ym2, ys2, base, restsum, u, ar) * keep >= value))
                continue;
            for (int t = 0; t < NT; t++) used2[t] = T->usage[(Py_ssize_t)qi * NT + t] + used[t];
            if (T->two) {
                const int64_t *tq = T->twoq + 4 * qi;
                two_use_core(g_used, g2, W, T->d, (int)tq[0], (int)tq[1], (Py_ssize_t)tq[2], (Py_ssize_t)tq[3], T->dq, T->yscr);
            }
            if (use_levels && rest) {
                const double others = ys2 + yi + restsum + (u >= umin ? u : umin) + (ar >= ar_floor ? ar : ar_floor);
                const int j = tree_level_of(T, (value / keep - others) / mm1);
                if (j >= 0) {
                    int r = tree_level_fits(T, j, i + 1, e, used2, g2);
                    if (r < 0) {
                        T->err = 1;
                        goto done;
                    }
                    if (!r) continue;
                }
            }
            T->ch_s[i] = s, T->ch_e[i] = e, T->ch_q[i] = qi;
            if (rest == 0) {
                tree_leaf(T, i + 1, lb);
                value = T->value;
            } else {
                int32_t *key = T->key;
                key[0] = i + 1, key[1] = e, key[2] = qi;
                for (int a = 0; a <= i; a++) { /* the sets so far, sorted (insertion) */
                    int32_t x = T->ch_q[a];
                    int b = a - 1;
                    while (b >= 0 && key[3 + b] > x) key[3 + b + 1] = key[3 + b], b--;
                    key[3 + b + 1] = x;
                }
                const double vals[MEMO_VALS] = {ym2, ys2, ci, b_here, u, ar};
                int dom = memo_dominated(&T->memo, key, i + 4, vals);
                if (dom < 0) {
                    PyErr_NoMemory();
                    T->err = 1;
                    goto done;
                }
                if (!dom) {
                    T->span_stack[i + 1] = region;
                    tree_rec(T, i + 1, e, ym2, ys2, ci, b_here, u, ar);
                    value = T->value;
                }
            }
            if (T->stop || T->abort || T->err) goto done;
        }
        if (!any_ok && tree_past_room(T, base_min_c, armax)) break;
    }
done:
    for (int b = 0; b < nlag; b++) PyBuffer_Release(&lagbuf[b]);
    Py_XDECREF(lagobj);
}

/* tree_run(arrays, ints, doubles, callbacks): _Triple.rec from the root in C (the block comment above); the arrays,
   sizes and callbacks as search.py's _Triple.tree passes them.  Returns (nodes, ticks, triple nodes, calls since the
   clock was read, stop, abort, incumbent). */
static PyObject *tree_run(PyObject *self, PyObject *args) {
    (void)self;
    enum { NA = 26, NI = 23, ND = 10, NC = 6 };
    PyObject *o_arr, *o_int, *o_dbl, *o_cb;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyTuple_Type, &o_arr, &PyTuple_Type, &o_int, &PyTuple_Type, &o_dbl, &PyTuple_Type, &o_cb))
        return NULL;
    if (PyTuple_GET_SIZE(o_arr) != NA || PyTuple_GET_SIZE(o_int) != NI || PyTuple_GET_SIZE(o_dbl) != ND || PyTuple_GET_SIZE(o_cb) != NC) {
        PyErr_SetString(PyExc_ValueError, "tree_run: wrong argument counts");
        return NULL;
    }
    long long iv[NI];
    double dv[ND];
    for (int k = 0; k < NI; k++) iv[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(o_int, k));
    for (int k = 0; k < ND; k++) dv[k] = PyFloat_AsDouble(PyTuple_GET_ITEM(o_dbl, k));
    if (PyErr_Occurred()) return NULL;
    Tree T0;
    memset(&T0, 0, sizeof(T0));
    Tree *T = &T0;
    T->P = (int)iv[0], T->L1 = (int)iv[1], T->Q = (int)iv[2], T->NT = (int)iv[3], T->W = (int)iv[4], T->two = (int)iv[5];
    T->span = (int)iv[6], T->lag = (int)iv[7], T->sound = (int)iv[8], T->balanced = (int)iv[9], T->todo = (int)iv[10];
    T->d = (Py_ssize_t)iv[11], T->m = iv[12], T->nodes = iv[13], T->ticks = iv[14], T->triple_nodes = iv[15];
    T->node_cap = iv[16], T->nodes0 = iv[17], T->ystar_after = iv[18], T->level_after = iv[19], T->tick = iv[20];
    T->entries = iv[21], T->entry_tick = iv[22];
    T->keep = dv[0], T->value = dv[1], T->floor_y = dv[2], T->ar_floor = dv[3], T->umin = dv[4], T->tmin = dv[5];
    T->xmin_all = dv[6], T->cminpre_L = dv[7], T->cap1 = dv[8], T->y_cap_masks = dv[9];
    T->mm1 = (double)(T->m - 1);
    const Py_ssize_t P = T->P, L1 = T->L1, Q = T->Q, NT = T->NT, W = T->W;
    if (P < 1 || L1 < 2 || Q < 1 || NT < 0 || W < 1 || T->d < 1 || T->m < 1) {
        PyErr_SetString(PyExc_ValueError, "tree_run: bad sizes");
        return NULL;
    }
    const Py_ssize_t tw = T->two ? 1 : 0, sp = T->span ? 1 : 0;
    /* each array's least size in bytes, in argument order */
    const Py_ssize_t need[NA] = {Q * L1 * L1 * 8, Q * L1 * 8, Q * L1 * 8, Q * L1 * L1 * 8, Q * NT * 8, NT * 8, NT * 8,
                                 (P + 1) * L1 * 8, (P + 1) * L1 * 8, (P + 1) * NT * L1 * 8, tw * (P + 1) * L1 * W * 8, P * 8,
                                 P * 8, Q * 8, P * L1 * L1 * 8, tw * Q * 4 * 8, sp * Q * 8, tw * (P + 1) * L1,
                                 sp * (P + 1) * L1 * 8, sp * (P + 1) * L1 * 8, sp * (P + 1) * L1 * 8, sp * (P + 1) * L1 * 8,
                                 sp * L1 * 8, 0, Q * L1 * 2 * Q * 8, Q * L1};
    Py_buffer v[NA];
    PyObject *arr[NA];
    for (int k = 0; k < NA; k++) arr[k] = PyTuple_GET_ITEM(o_arr, k);
    int got = take_sized(arr, v, need, NA, 0, 0, "tree_run"), rc = got < NA ? -1 : 0;
    PyObject *result = NULL;
    if (!rc) {
        T->cq = (const double *)v[0].buf, T->aq = (const double *)v[1].buf, T->uq = (const double *)v[2].buf;
        T->arq = (const double *)v[3].buf, T->usage = (const double *)v[4].buf, T->caps_tol = (const double *)v[5].buf;
        T->lam_cap = (const double *)v[6].buf, T->rmax = (const double *)v[7].buf, T->rsum = (const double *)v[8].buf;
        T->suffix = (const double *)v[9].buf, T->two_np = (const double *)v[10].buf, T->ka = (const double *)v[11].buf;
        T->kb = (const double *)v[12].buf, T->bits = (const int64_t *)v[13].buf, T->allowed = (const int64_t *)v[14].buf;
        T->twoq = (const int64_t *)v[15].buf, T->set_region = (const int64_t *)v[16].buf;
        T->two_none = (const int8_t *)v[17].buf, T->in_max = (const double *)v[18].buf, T->in_sum = (const double *)v[19].buf;
        T->lat_max = (const double *)v[20].buf, T->lat_sum = (const double *)v[21].buf, T->acr = (const double *)v[22].buf;
        T->pair_tab = (const double *)v[24].buf, T->pair_have = (const uint8_t *)v[25].buf;
        Py_ssize_t nlev = v[23].len / (Py_ssize_t)sizeof(double);
        if (nlev > TREE_LEVELS) {
            PyErr_SetString(PyExc_ValueError, "tree_run: too many cap levels");
            rc = -1;
        } else {
            T->nlev = (int)nlev;
            for (Py_ssize_t j = 0; j < nlev; j++) T->lev_cap[j] = ((const double *)v[23].buf)[j];
        }
        for (int k = 0; k < NC; k++) {
            PyObject *cb = PyTuple_GET_ITEM(o_cb, k);
            if (!PyCallable_Check(cb)) {
                PyErr_SetString(PyExc_TypeError, "tree_run: callbacks must be callable");
                rc = -1;
            }
        }
        T->cb_pair = PyTuple_GET_ITEM(o_cb, 0), T->cb_level = PyTuple_GET_ITEM(o_cb, 1), T->cb_leaf = PyTuple_GET_ITEM(o_cb, 2);
        T->cb_expired = PyTuple_GET_ITEM(o_cb, 3), T->cb_raise = PyTuple_GET_ITEM(o_cb, 4), T->cb_lag = PyTuple_GET_ITEM(o_cb, 5);
    }
    if (!rc) {
        T->pair = (const double **)calloc((size_t)(Q * L1), sizeof(double *));
        T->ch_s = (int *)calloc((size_t)P, sizeof(int));
        T->ch_e = (int *)calloc((size_t)P, sizeof(int));
        T->ch_q = (int *)calloc((size_t)P, sizeof(int));
        T->span_stack = (int *)calloc((size_t)(P + 1), sizeof(int));
        T->ymax2 = (double *)calloc((size_t)(P * Q), sizeof(double));
        T->ysum2 = (double *)calloc((size_t)(P * Q), sizeof(double));
        T->bhere = (double *)calloc((size_t)(P * Q), sizeof(double));
        T->used = (double *)calloc((size_t)((P + 1) * (NT ? NT : 1)), sizeof(double));
        T->g = (double *)calloc((size_t)((P + 1) * W), sizeof(double));
        T->minlb = (double *)calloc((size_t)(P * L1), sizeof(double));
        T->basemin = (double *)calloc((size_t)(P * L1), sizeof(double));
        T->cand = (int64_t *)calloc((size_t)(P * L1 * Q), sizeof(int64_t));
        T->cnt = (int64_t *)calloc((size_t)(P * L1), sizeof(int64_t));
        T->ends = (int64_t *)calloc((size_t)(P * L1), sizeof(int64_t));
        T->dq = (Py_ssize_t *)calloc((size_t)(W + 1), sizeof(Py_ssize_t));
        T->yscr = (double *)calloc((size_t)(W + 1), sizeof(double));
        T->key = (int32_t *)calloc((size_t)(P + 4), sizeof(int32_t));
        if (!T->pair || !T->ch_s || !T->ch_e || !T->ch_q || !T->span_stack || !T->ymax2 || !T->ysum2 || !T->bhere || !T->used ||
            !T->g || !T->minlb || !T->basemin || !T->cand || !T->cnt || !T->ends || !T->dq || !T->yscr || !T->key) {
            PyErr_NoMemory();
            rc = -1;
        }
    }
    if (!rc) {
        T->span_stack[0] = -2; /* no stage decided */
        tree_rec(T, 0, 0, -INFINITY, 0.0, 0.0, 0.0, -INFINITY, 0.0);
        if (!T->err)
            result = Py_BuildValue("(LLLLiid)", T->nodes, T->ticks, T->triple_nodes, T->entries, T->stop, T->abort, T->value);
    }
    free((void *)T->pair), free(T->ch_s), free(T->ch_e), free(T->ch_q), free(T->span_stack), free(T->ymax2), free(T->ysum2);
    free(T->bhere), free(T->used), free(T->g), free(T->minlb), free(T->basemin), free(T->cand), free(T->cnt), free(T->ends);
    free(T->dq), free(T->yscr), free(T->key);
    for (int j = 0; j < TREE_LEVELS; j++) {
        for (int b = 0; b < T->lev_nbuf[j]; b++) PyBuffer_Release(&T->lev_buf[j][b]);
        Py_XDECREF(T->lev_obj[j]);
    }
    memo_free(&T->memo);
    release_buffers(v, got);
    return result;
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
    {"bottleneck", bottleneck, METH_VARARGS,
     "bottleneck(ylb, masks, rmax, rsum, ymin, P, nk, L1[, upper]): _bottleneck_arr's least y per stage and its "
     "programs (upper: ylb is inf wherever e <= s0, not read there)."},
    {"span_dp", span_dp, METH_VARARGS,
     "span_dp(masks, ylb, ymin, inc_a, inc_b, ka, kb, nmax, nsum, in_max, in_sum, lat_max, lat_sum, P, nk, L1[, upper]): "
     "the crossing programs of _Triple.span_tables (upper: ylb and ymin are inf wherever e <= s0)."},
    {"tree_run", tree_run, METH_VARARGS,
     "tree_run(arrays, ints, doubles, callbacks): the tree of one (mbs, D, P) from its root (search.py, _Triple.rec)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hetero", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__hetero(void) { return PyModule_Create(&module); }
