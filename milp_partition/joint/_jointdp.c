/*
 * The joint DP's feasibility pass in C: the same pass as JointDP.feasible (milp_partition/joint/dp.py),
 * states (ideal, s) with the fewest devices, for a target time per sample T.  One context holds the
 * indexed problem and, per (ideal, sub-ideal, t), the stage's least costs and a cache of exact knapsack
 * values, kept across the passes of one search.  Python builds the plan from the returned steps with
 * its own (numpy) tables and the verifier re-checks it, so this file proves nothing alone: it decides
 * which states are reachable, exactly as the Python pass does (the tests compare both on every pass).
 *
 * Knapsack (the stage's configuration choice under memory): exact, a Pareto frontier DP over the nodes
 * whose fastest option is not also their smallest, pruned by the memory the remaining nodes need at
 * least and by an LP lower bound against a greedy solution's cost (see min_cost_exact in knapsack.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    double *F;     /* w_sum: G[y] (y = 0..ymax); else F[q * (ymax + 1) + y]; NAN = not computed */
    double *FL, *FU; /* the same layout: LP lower and greedy upper bounds */
    double *fast;  /* [ndiv_t] least cost ignoring memory */
    int *y_fit;    /* [ndiv_t] largest y at which the least-cost choice fits */
    double w_sum;  /* sum of W when every option of a node has the same W; NAN otherwise */
    int y_small;   /* largest y at which the least-memory choice fits; -1 not computed */
} TInfo;

typedef struct {
    int n, E, L, nw, nt, ndiv, nkinds, smax, ymax;
    double B, N;
    /* the cluster's device kinds as arrays (the joint problem takes one kind: index 0 is the cluster's memory M per
       device and device count k) */
    double *kind_mem;
    int *kind_count;
    int *degrees, *width, *ndiv_t;
    long *off_node, *off_edge; /* per t: offset into the node (n * W) and edge (E * W) arrays */
    double *p, *w, *a, *b, *ein, *eout;
    int *esrc, *etgt, *in_start, *in_edges, *out_start, *out_edges;
    uint64_t *words;
    double *ideal_work, *ideal_p, *ideal_w; /* ideal_p/_w: [nt * L] */
    int *divs;
    long *sub_start; /* CSR: sub-ideals of each ideal */
    int *sub;
    long pairs;
    TInfo **info; /* [pairs * nt], lazily */
    /* scratch */
    int *nodes;
    double *P, *W, *A, *Bf, *cost, *mem, *comm;
    /* per-pass state */
    double *best;
    int *parent;
    long knapsacks, tables;
    /* arena of the stage data (TInfo and its fast / y_fit arrays): never freed one by one */
    char **blocks;
    int nblocks, capblocks, oom;
    /* which stage's rows the scratch P, W, A, Bf (and nodes) hold now: (i, j, ti, m); i = -1 none */
    int rows_i, rows_j, rows_ti, rows_m;
    size_t left;
    char *next;
} Ctx;

#define ARENA_BLOCK (16u << 20)

/* `bytes` bytes from the context's arena (8-byte aligned; zeroed: fresh from calloc), NULL when out of memory */
static void *arena(Ctx *c, size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > c->left) {
        size_t sz = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
        if (c->nblocks == c->capblocks) {
            int cap = c->capblocks ? 2 * c->capblocks : 64;
            char **grown = (char **)realloc(c->blocks, sizeof(char *) * cap);
            if (!grown) return NULL;
            c->blocks = grown;
            c->capblocks = cap;
        }
        char *blk = (char *)calloc(1, sz);
        if (!blk) return NULL;
        c->blocks[c->nblocks++] = blk;
        c->next = blk;
        c->left = sz;
    }
    void *out = c->next;
    c->next += bytes;
    c->left -= bytes;
    return out;
}

static inline int has(const uint64_t *w, int v) { return (int)((w[v >> 6] >> (v & 63)) & 1u); }

/* whether the ideal of words `wj` lies inside the ideal of words `wi` (nw words each) */
static inline int inside(const uint64_t *wj, const uint64_t *wi, int nw) {
    for (int x = 0; x < nw; ++x) if (wj[x] & ~wi[x]) return 0;
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- knapsack ---------------- */

typedef struct { double m, c; } Pt;

/* qsort for the short arrays of one stage: insertion sort up to 48 elements (the comparators are total
 * orders, so the result is qsort's), qsort past that; elements of at most 64 bytes */
static void sort_few(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    if (n > 48 || size > 64) { qsort(base, n, size, cmp); return; }
    char *a = (char *)base, tmp[64];
    for (size_t r = 1; r < n; ++r) {
        size_t q = r;
        if (cmp(a + (q - 1) * size, a + q * size) <= 0) continue;
        memcpy(tmp, a + q * size, size);
        while (q > 0 && cmp(a + (q - 1) * size, tmp) > 0) { memcpy(a + q * size, a + (q - 1) * size, size); --q; }
        memcpy(a + q * size, tmp, size);
    }
}

static int cmp_pt(const void *x, const void *y) {
    const Pt *a = (const Pt *)x, *b = (const Pt *)y;
    if (a->m < b->m) return -1;
    if (a->m > b->m) return 1;
    if (a->c < b->c) return -1;
    if (a->c > b->c) return 1;
    return 0;
}

typedef struct { double eff, dm, dc; int pos; } Seg;

static int cmp_seg(const void *x, const void *y) {
    const Seg *a = (const Seg *)x, *b = (const Seg *)y;
    if (a->eff > b->eff) return -1;
    if (a->eff < b->eff) return 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

typedef struct { double ratio; int v, j; } Up;

static int cmp_up(const void *x, const void *y) {
    const Up *a = (const Up *)x, *b = (const Up *)y;
    if (a->ratio > b->ratio) return -1;
    if (a->ratio < b->ratio) return 1;
    if (a->v != b->v) return (a->v > b->v) - (a->v < b->v);
    return (a->j > b->j) - (a->j < b->j);
}

/* least sum of cost over one option per node with sum of mem <= M (INFINITY when nothing fits); with
 * bounds_only, *lo_out and *up_out get the LP relaxation's value and a greedy solution's (the exact value
 * where it is known at once) and the return value is NAN unless exact */
static double knap(int m, int W, const double *cost, const double *mem, double M, int bounds_only, double *lo_out,
                   double *up_out) {
    double fast_c = 0, fast_m = 0, small_m = 0;
    for (int v = 0; v < m; ++v) {
        double bc = INFINITY, bm = INFINITY, sm = INFINITY;
        for (int o = 0; o < W; ++o) {
            double c = cost[v * W + o], mm = mem[v * W + o];
            if (c < bc || (c == bc && mm < bm)) { bc = c; bm = mm; }
            if (mm < sm) sm = mm;
        }
        fast_c += bc; fast_m += bm; small_m += sm;
    }
    if ((!isfinite(fast_c) && !isfinite(small_m)) || !(small_m <= M)) {
        if (lo_out) { *lo_out = INFINITY; *up_out = INFINITY; }
        return INFINITY;
    }
    if (fast_m <= M) {
        if (lo_out) { *lo_out = fast_c; *up_out = fast_c; }
        return fast_c;
    }
    /* free nodes: their Pareto options (mem ascending, cost strictly descending); the rest fixed at the fastest */
    double base_c = 0, base_m = 0;
    int P = 0, maxo = 0;
    int *cnt = (int *)malloc(sizeof(int) * (m + 1));
    double *om = (double *)malloc(sizeof(double) * (m * W + 1)), *oc = (double *)malloc(sizeof(double) * (m * W + 1));
    Pt *tmp = (Pt *)malloc(sizeof(Pt) * (W + 1));
    for (int v = 0; v < m; ++v) {
        int nt = 0;
        for (int o = 0; o < W; ++o) {
            double c = cost[v * W + o], mm = mem[v * W + o];
            if (isfinite(c) && isfinite(mm)) { tmp[nt].m = mm; tmp[nt].c = c; ++nt; }
        }
        sort_few(tmp, nt, sizeof(Pt), cmp_pt);
        int kept = 0;
        double bestc = INFINITY;
        for (int r = 0; r < nt; ++r) {
            if (tmp[r].c < bestc) { tmp[kept++] = tmp[r]; bestc = tmp[r].c; }
        }
        if (kept == 1) { base_c += tmp[0].c; base_m += tmp[0].m; continue; }
        for (int r = 0; r < kept; ++r) { om[P * W + r] = tmp[r].m; oc[P * W + r] = tmp[r].c; }
        cnt[P++] = kept;
        if (kept > maxo) maxo = kept;
    }
    free(tmp);
    /* suffix sums of the least-memory options */
    double *rest_m = (double *)malloc(sizeof(double) * (P + 1)), *rest_c = (double *)malloc(sizeof(double) * (P + 1));
    rest_m[P] = 0; rest_c[P] = 0;
    for (int q = P - 1; q >= 0; --q) { rest_m[q] = rest_m[q + 1] + om[q * W]; rest_c[q] = rest_c[q + 1] + oc[q * W]; }
    /* greedy: least memory, then upgrades by seconds saved per byte while they fit (an upper bound) */
    Up *ups = (Up *)malloc(sizeof(Up) * (P * W + 1));
    int nu = 0;
    for (int q = 0; q < P; ++q)
        for (int r = 1; r < cnt[q]; ++r) {
            ups[nu].ratio = (oc[q * W] - oc[q * W + r]) / (om[q * W + r] - om[q * W]);
            ups[nu].v = q; ups[nu].j = r; ++nu;
        }
    sort_few(ups, nu, sizeof(Up), cmp_up);
    int *cur = (int *)calloc(P + 1, sizeof(int));
    double used = base_m + rest_m[0], upper = base_c + rest_c[0];
    for (int u = 0; u < nu; ++u) {
        int q = ups[u].v, r = ups[u].j, c0 = cur[q];
        if (oc[q * W + r] >= oc[q * W + c0]) continue;
        double extra = om[q * W + r] - om[q * W + c0];
        if (used + extra <= M) { used += extra; upper += oc[q * W + r] - oc[q * W + c0]; cur[q] = r; }
    }
    free(ups); free(cur);
    double greedy_value = upper;
    upper *= (1 + 1e-12);
    /* LP bound of the suffixes: hull segments of every free node, best saving per byte first */
    Seg *segs = (Seg *)malloc(sizeof(Seg) * (P * W + 1));
    int ns = 0;
    for (int q = 0; q < P; ++q) {
        int at = 0;
        while (1) {
            int nx = -1;
            double be = -1;
            for (int r = at + 1; r < cnt[q]; ++r) {
                double dm = om[q * W + r] - om[q * W + at], dc = oc[q * W + at] - oc[q * W + r];
                if (dm > 0 && dc > 0 && dc / dm > be) { be = dc / dm; nx = r; }
            }
            if (nx < 0) break;
            segs[ns].dm = om[q * W + nx] - om[q * W + at];
            segs[ns].dc = oc[q * W + at] - oc[q * W + nx];
            segs[ns].eff = be; segs[ns].pos = q; ++ns;
            at = nx;
        }
    }
    sort_few(segs, ns, sizeof(Seg), cmp_seg);
    if (bounds_only) { /* the LP relaxation of all free nodes: whole segments best first, the last one in part */
        double room = M - base_m - rest_m[0], saved = 0;
        for (int r = 0; r < ns && room > 0; ++r) {
            if (segs[r].dm <= room) { saved += segs[r].dc; room -= segs[r].dm; }
            else { saved += room * segs[r].eff; room = 0; }
        }
        *lo_out = (base_c + rest_c[0] - saved) * (1 - 1e-12);
        *up_out = greedy_value;
        free(segs); free(rest_m); free(rest_c); free(om); free(oc); free(cnt);
        return NAN;
    }
    /* cum_m/cum_c for suffix q: over the segments of nodes >= q, in efficiency order; row q has ns + 1 entries */
    double *cum_m = (double *)malloc(sizeof(double) * (size_t)(P + 1) * (ns + 1));
    double *cum_c = (double *)malloc(sizeof(double) * (size_t)(P + 1) * (ns + 1));
    double *eff = (double *)malloc(sizeof(double) * (size_t)(P + 1) * (ns + 1));
    int *len = (int *)malloc(sizeof(int) * (P + 1));
    for (int q = 0; q <= P; ++q) {
        double *cm = cum_m + (size_t)q * (ns + 1), *cc = cum_c + (size_t)q * (ns + 1), *ef = eff + (size_t)q * (ns + 1);
        int l = 0;
        cm[0] = 0; cc[0] = 0;
        for (int s = 0; s < ns; ++s)
            if (segs[s].pos >= q) { cm[l + 1] = cm[l] + segs[s].dm; cc[l + 1] = cc[l] + segs[s].dc; ef[l] = segs[s].eff; ++l; }
        len[q] = l;
    }
    free(segs);
    /* frontier DP */
    long cap = 1024;
    Pt *F = (Pt *)malloc(sizeof(Pt) * cap), *G = (Pt *)malloc(sizeof(Pt) * cap * maxo);
    long nf = 1;
    F[0].m = base_m; F[0].c = base_c;
    for (int q = 0; q < P; ++q) {
        if (nf * cnt[q] > cap * maxo) {
            while (nf * cnt[q] > cap * maxo) cap *= 2;
            G = (Pt *)realloc(G, sizeof(Pt) * cap * maxo);
        }
        long ng = 0;
        double room_after = M - rest_m[q + 1];
        for (int r = 0; r < cnt[q]; ++r)
            for (long f = 0; f < nf; ++f) {
                double mm = F[f].m + om[q * W + r];
                if (mm <= room_after) { G[ng].m = mm; G[ng].c = F[f].c + oc[q * W + r]; ++ng; }
            }
        sort_few(G, ng, sizeof(Pt), cmp_pt);
        /* Pareto filter and LP pruning */
        const double *cm = cum_m + (size_t)(q + 1) * (ns + 1), *cc = cum_c + (size_t)(q + 1) * (ns + 1);
        const double *ef = eff + (size_t)(q + 1) * (ns + 1);
        int l = len[q + 1];
        if (ng > cap) {
            while (ng > cap) cap *= 2;
            F = (Pt *)realloc(F, sizeof(Pt) * cap);
            G = (Pt *)realloc(G, sizeof(Pt) * cap * maxo);
        }
        nf = 0;
        double bestc = INFINITY, cheapest_c = INFINITY;
        Pt cheapest = {0, 0};
        for (long g = 0; g < ng; ++g) {
            if (!(G[g].c < bestc)) continue;
            bestc = G[g].c;
            if (G[g].c < cheapest_c) { cheapest_c = G[g].c; cheapest = G[g]; }
            if (q + 1 < P) {
                double room = M - G[g].m - rest_m[q + 1];
                if (room < 0) room = 0;
                int lo = 0, hi = l; /* largest lo with cm[lo] <= room */
                while (lo < hi) { int mid = (lo + hi + 1) / 2; if (cm[mid] <= room) lo = mid; else hi = mid - 1; }
                double saved = cc[lo] + (lo < l ? (room - cm[lo]) * ef[lo] : 0.0);
                if (G[g].c + rest_c[q + 1] - saved > upper) continue;
            }
            F[nf++] = G[g];
        }
        if (nf == 0 && isfinite(cheapest_c)) F[nf++] = cheapest; /* rounding: keep the cheapest */
        if (nf == 0) break;
    }
    double out = INFINITY;
    for (long f = 0; f < nf; ++f) if (F[f].c < out) out = F[f].c;
    free(F); free(G); free(cum_m); free(cum_c); free(eff); free(len);
    free(rest_m); free(rest_c); free(om); free(oc); free(cnt);
    return out;
}

/* ---------------------------------------------------------------- stage tables ------------- */

/* rows of stage I_i \ I_j on degree index ti into c->nodes/P/W/A/Bf; returns the node count */
static int stage_rows(Ctx *c, int i, int j, int ti) {
    if (c->rows_i == i && c->rows_j == j && c->rows_ti == ti) return c->rows_m;
    const uint64_t *wi = c->words + (size_t)i * c->nw, *wj = c->words + (size_t)j * c->nw;
    int Wd = c->width[ti], m = 0;
    const double *p = c->p + c->off_node[ti], *w = c->w + c->off_node[ti];
    const double *a = c->a + c->off_node[ti], *b = c->b + c->off_node[ti];
    const double *ein = c->ein + c->off_edge[ti], *eout = c->eout + c->off_edge[ti];
    double scale = 4.0 / (c->N * c->B);
    for (int x = 0; x < c->nw; ++x) {
      for (uint64_t bits = wi[x] & ~wj[x]; bits; bits &= bits - 1) {
        int v = 64 * x + __builtin_ctzll(bits);
        double *comm = c->comm;
        for (int o = 0; o < Wd; ++o) comm[o] = 0.0;
        for (long r = c->in_start[v]; r < c->in_start[v + 1]; ++r) {
            int e = c->in_edges[r];
            if (has(wj, c->esrc[e]))
                for (int o = 0; o < Wd; ++o) comm[o] += ein[(size_t)e * Wd + o];
        }
        for (long r = c->out_start[v]; r < c->out_start[v + 1]; ++r) {
            int e = c->out_edges[r];
            if (!has(wi, c->etgt[e]))
                for (int o = 0; o < Wd; ++o) comm[o] += eout[(size_t)e * Wd + o];
        }
        c->nodes[m] = v;
        for (int o = 0; o < Wd; ++o) {
            double pv = p[(size_t)v * Wd + o] + comm[o] / c->B;
            c->P[m * Wd + o] = pv;
            c->W[m * Wd + o] = isfinite(pv) ? scale * w[(size_t)v * Wd + o] : 0.0;
            c->A[m * Wd + o] = a[(size_t)v * Wd + o];
            c->Bf[m * Wd + o] = b[(size_t)v * Wd + o];
        }
        ++m;
      }
    }
    c->rows_i = i; c->rows_j = j; c->rows_ti = ti; c->rows_m = m;
    return m;
}

static TInfo *tinfo(Ctx *c, long pair, int i, int j, int ti) {
    TInfo **slot = c->info + pair * c->nt + ti;
    if (*slot) return *slot;
    int nd = c->ndiv_t[ti], Wd = c->width[ti];
    TInfo *t = (TInfo *)arena(c, sizeof(TInfo) + sizeof(double) * (nd + 1) + sizeof(int) * (nd + 1));
    if (!t) return NULL;
    t->fast = (double *)(t + 1);
    t->y_fit = (int *)(t->fast + nd + 1);
    t->y_small = -1;
    t->F = NULL;
    int m = stage_rows(c, i, j, ti);
    c->tables++;
    /* w_sum: every finite option of a node has the W of its first option */
    int uniform = 1;
    double ws = 0;
    for (int v = 0; v < m && uniform; ++v) {
        double w0 = c->W[v * Wd];
        for (int o = 0; o < Wd; ++o)
            if (isfinite(c->P[v * Wd + o]) && c->W[v * Wd + o] != w0) { uniform = 0; break; }
        ws += w0;
    }
    t->w_sum = uniform ? ws : NAN;
    for (int q = 0; q < nd; ++q) {
        double dp = (double)c->divs[q], fast = 0, sa = 0, sb = 0;
        for (int v = 0; v < m; ++v) {
            double bc = INFINITY, ba = INFINITY;
            int pick = 0;
            for (int o = 0; o < Wd; ++o) {
                double cst = (c->P[v * Wd + o] + (dp - 1) * c->W[v * Wd + o]) / dp;
                if (cst < bc) { bc = cst; ba = c->A[v * Wd + o]; pick = o; }
                else if (cst == bc && c->A[v * Wd + o] < ba) { ba = c->A[v * Wd + o]; pick = o; }
            }
            fast += (isfinite(bc) ? bc : INFINITY);
            sa += c->A[v * Wd + pick];
            sb += c->Bf[v * Wd + pick];
        }
        t->fast[q] = fast;
        int y;
        if (sb > c->kind_mem[0]) y = 0;
        else if (sa <= 0) y = c->smax + 1;
        else {
            double yy = floor((c->kind_mem[0] - sb) / sa);
            if (yy > c->smax + 1) yy = c->smax + 1;
            y = (int)yy;
            while (y > 0 && sa * y + sb > c->kind_mem[0]) --y;
        }
        t->y_fit[q] = y;
    }
    *slot = t;
    return t;
}

/* the cache slot of (q, y) in *arr (allocated lazily, NAN = unknown): per y when w_sum, else per (q, y) */
static double *slot_of(Ctx *c, TInfo *t, int ti, double **arr, int q, int y) {
    int Y = c->ymax + 1, ws = !isnan(t->w_sum);
    if (!*arr) {
        long sz = ws ? Y : (long)c->ndiv_t[ti] * Y;
        *arr = (double *)malloc(sizeof(double) * sz);
        for (long r = 0; r < sz; ++r) (*arr)[r] = NAN;
    }
    return ws ? &(*arr)[y] : &(*arr)[(long)q * Y + y];
}

/* the stage's knapsack at (d = divs[q], y) into c->cost, c->mem; returns the node count */
static int knap_rows(Ctx *c, TInfo *t, int i, int j, int ti, int q, int y) {
    int m = stage_rows(c, i, j, ti), Wd = c->width[ti], ws = !isnan(t->w_sum);
    double dp = (double)c->divs[q];
    for (int v = 0; v < m; ++v)
        for (int o = 0; o < Wd; ++o) {
            double P = c->P[v * Wd + o], W = c->W[v * Wd + o];
            c->cost[v * Wd + o] = ws ? P : (P + (dp - 1) * W) / dp;
            c->mem[v * Wd + o] = c->A[v * Wd + o] * y + c->Bf[v * Wd + o];
        }
    return m;
}

/* a raw knapsack value (G when w_sum) as the stage's time per sample at d = divs[q] */
static double as_F(Ctx *c, TInfo *t, int q, double raw) {
    double dp = (double)c->divs[q];
    return isnan(t->w_sum) ? raw : (raw + (dp - 1) * t->w_sum) / dp;
}

/* F(stage, d = divs[q], y): the exact least time per sample (cached) */
static double value_F(Ctx *c, TInfo *t, int i, int j, int ti, int q, int y) {
    double *slot = slot_of(c, t, ti, &t->F, q, y);
    if (isnan(*slot)) {
        int m = knap_rows(c, t, i, j, ti, q, y);
        *slot = knap(m, c->width[ti], c->cost, c->mem, c->kind_mem[0], 0, NULL, NULL);
        c->knapsacks++;
    }
    return as_F(c, t, q, *slot);
}

/* (lower, upper) bounds on F(stage, d, y): the LP relaxation and a greedy choice (exact where cached) */
static void bounds_F(Ctx *c, TInfo *t, int i, int j, int ti, int q, int y, double *lo, double *up) {
    if (t->F) {
        double *slot = slot_of(c, t, ti, &t->F, q, y);
        if (!isnan(*slot)) { *lo = *up = as_F(c, t, q, *slot); return; }
    }
    double *sl = slot_of(c, t, ti, &t->FL, q, y), *su = slot_of(c, t, ti, &t->FU, q, y);
    if (isnan(*sl)) {
        int m = knap_rows(c, t, i, j, ti, q, y);
        double l = 0, u = 0, v = knap(m, c->width[ti], c->cost, c->mem, c->kind_mem[0], 1, &l, &u);
        if (!isnan(v)) { l = v; u = v; }
        *sl = l; *su = u;
    }
    *lo = as_F(c, t, q, *sl);
    *up = as_F(c, t, q, *su);
}

static int fits_small(Ctx *c, int m, int Wd, int y) {
    double s = 0;
    for (int v = 0; v < m; ++v) {
        double b = INFINITY;
        for (int o = 0; o < Wd; ++o) {
            double x = c->A[v * Wd + o] * y + c->Bf[v * Wd + o];
            if (x < b) b = x;
        }
        s += b;
    }
    return s <= c->kind_mem[0];
}

static int y_small(Ctx *c, TInfo *t, int i, int j, int ti) {
    if (t->y_small >= 0) return t->y_small;
    int m = stage_rows(c, i, j, ti), Wd = c->width[ti];
    int lo = 0, hi = c->smax + 1;
    if (fits_small(c, m, Wd, hi)) lo = hi;
    else
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (fits_small(c, m, Wd, mid)) lo = mid; else hi = mid;
        }
    t->y_small = lo;
    return lo;
}

static int ok_at(Ctx *c, TInfo *t, int i, int j, int ti, int q, int y, double target, int strict) {
    double lo, up;
    bounds_F(c, t, i, j, ti, q, y, &lo, &up);
    if (strict ? up < target : up <= target) return 1;
    if (strict ? lo >= target : lo > target) return 0;
    double v = value_F(c, t, i, j, ti, q, y);
    return strict ? v < target : v <= target;
}

static int y_max(Ctx *c, TInfo *t, int i, int j, int ti, int q, double target, int strict, int y_cap) {
    int lo = t->y_fit[q];
    if (lo >= y_cap) return y_cap;
    int hi = y_small(c, t, i, j, ti);
    if (hi > y_cap) hi = y_cap;
    if (isinf(target) && !strict) return hi > lo ? hi : lo;
    if (hi <= lo) return lo;
    if (ok_at(c, t, i, j, ti, q, hi, target, strict)) return hi;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (ok_at(c, t, i, j, ti, q, mid, target, strict)) lo = mid; else hi = mid;
    }
    return lo;
}

/* ---------------------------------------------------------------- the pass ----------------- */

static double pair_bound(double w_s, double w_j, int budget) {
    if (budget > 64) return (w_s + w_j) / budget;
    double best = INFINITY;
    for (int a = 1; a <= budget; ++a) {
        int rest = budget - a;
        double need_rest = rest > 0 ? w_j / rest : (w_j > 0 ? INFINITY : 0.0);
        double x = w_s / a > need_rest ? w_s / a : need_rest;
        if (x < best) best = x;
    }
    return best;
}

/* relax the transitions from ideal i (states arr) to sub-ideal j; returns the least value cut by (c) or (d) */
static double extend(Ctx *c, int i, int j, long pair, double need, double freed, const int *finite, int nfin,
                     double target, int strict) {
    int S1 = c->smax + 1, smax = c->smax, s_lo = finite[0];
    const double *arr = c->best + (size_t)i * S1;
    double *tgt = c->best + (size_t)j * S1;
    int *par = c->parent + (size_t)j * S1 * 4;
    double nxt = INFINITY;
    for (int ti = 0; ti < c->nt; ++ti) {
        int t = c->degrees[ti];
        if (t > freed) break;
        TInfo *inf = tinfo(c, pair, i, j, ti);
        if (!inf) { c->oom = 1; return nxt; }
        for (int q = 0; q < c->ndiv_t[ti]; ++q) {
            int d = c->divs[q];
            if (!((double)d * t <= freed && d + s_lo <= smax)) continue;
            double fast = inf->fast[q];
            if (!(strict ? fast < target : fast <= target)) { if (fast < nxt) nxt = fast; continue; } /* (c) */
            int y_cap = (smax - 1) / d + 2;
            int ym = inf->y_fit[q] >= y_cap ? y_cap : y_max(c, inf, i, j, ti, q, target, strict, y_cap);
            int s_top = -1;
            if (ym >= 1) { s_top = d * (ym - 1); if (s_top > smax - d) s_top = smax - d; }
            /* (d) states cut by memory at the target: F at the least y among them */
            for (int r = 0; r < nfin; ++r) {
                int s = finite[r];
                if (s > s_top && s + d <= smax) {
                    int y_over = (s + d + d - 1) / d;
                    double lo, up, v;
                    bounds_F(c, inf, i, j, ti, q, y_over, &lo, &up);
                    v = lo > target ? lo : value_F(c, inf, i, j, ti, q, y_over);
                    if (v < nxt) nxt = v;
                    break;
                }
                if (s + d > smax) break;
            }
            if (s_top < s_lo) continue;
            double dt = (double)d * t;
            for (int r = 0; r < nfin && finite[r] <= s_top; ++r) {
                int s = finite[r];
                double v = arr[s] + dt;
                if (v <= c->kind_count[0] - need && v < tgt[s + d]) {
                    tgt[s + d] = v;
                    int *pp = par + (size_t)(s + d) * 4;
                    pp[0] = i; pp[1] = s; pp[2] = d; pp[3] = t;
                }
            }
        }
    }
    return nxt;
}

/* one pass: 1 found (steps in c->parent), 0 none; -2 deadline; -1 Python error (a signal) */
static int pass(Ctx *c, double target, int strict, double deadline, double *nxt_out) {
    int L = c->L, S1 = c->smax + 1, full = L - 1;
    for (long r = 0; r < (long)L * S1; ++r) c->best[r] = INFINITY;
    c->best[(size_t)full * S1] = 0.0;
    int bounded = isfinite(target) && target > 0;
    double nxt = INFINITY;
    int *finite = (int *)malloc(sizeof(int) * (S1 + 1));
    int status = 0;
    for (int i = full; i >= 1; --i) {
        if (PyErr_CheckSignals() < 0) { status = -1; break; }
        if (c->oom) break;
        if (isfinite(deadline) && now_s() > deadline) { status = -2; break; }
        const double *arr = c->best + (size_t)i * S1;
        /* the states not dominated by one with less s and no more devices (less s: less memory in flight
           for every stage still to build, so whatever follows a dominated state follows its dominator) */
        int nfin = 0;
        double used = INFINITY;
        for (int s = 0; s < S1; ++s)
            if (arr[s] < used) { finite[nfin++] = s; used = arr[s]; }
        if (nfin == 0) continue;
        double freed = c->kind_count[0] - used;
        if (freed < 1) continue;
        if (bounded && c->ideal_work[i] > target * freed) { /* (a) */
            double x = c->ideal_work[i] / freed;
            if (x < nxt) nxt = x;
            continue;
        }
        for (long r = c->sub_start[i]; r < c->sub_start[i + 1]; ++r) {
            int j = c->sub[r];
            double need = 0.0;
            if (bounded && freed > 1) { /* (b) */
                double w_j = c->ideal_work[j], w_s = c->ideal_work[i] - w_j;
                if (w_s < 0) w_s = 0;
                double need_j = j == 0 ? 0.0 : ceil(w_j / target * (1 - 1e-9));
                double need_s = ceil(w_s / target * (1 - 1e-9));
                if (need_s < 1) need_s = 1;
                if (need_s + need_j > freed) {
                    double x = pair_bound(w_s, w_j, (int)freed);
                    if (x < nxt) nxt = x;
                    continue;
                }
                need = need_j;
            } else if (freed <= 1 && j != 0) continue;
            if (bounded) { /* (b') */
                double lb_all = INFINITY;
                for (int ti = 0; ti < c->nt; ++ti) {
                    int t = c->degrees[ti], dmax = 0;
                    for (int q = 0; q < c->ndiv; ++q) if ((double)c->divs[q] * t <= freed) dmax = c->divs[q];
                    if (dmax == 0) continue;
                    double p_s = c->ideal_p[(size_t)ti * L + i] - c->ideal_p[(size_t)ti * L + j];
                    double w_s = c->ideal_w[(size_t)ti * L + i] - c->ideal_w[(size_t)ti * L + j];
                    if (p_s < 0) p_s = 0;
                    if (w_s < 0) w_s = 0;
                    double lb = p_s >= w_s ? (p_s - w_s) / dmax + w_s : p_s;
                    lb *= (1 - 1e-12);
                    if (lb < lb_all) lb_all = lb;
                }
                if (strict ? lb_all >= target : lb_all > target) {
                    if (lb_all < nxt) nxt = lb_all;
                    continue;
                }
            }
            double x = extend(c, i, j, r, need, freed, finite, nfin, target, strict);
            if (x < nxt) nxt = x;
            if (c->oom) break;
        }
    }
    free(finite);
    if (c->oom && status == 0) { c->oom = 0; PyErr_NoMemory(); status = -1; }
    *nxt_out = nxt;
    if (status != 0) return status;
    for (int s = 0; s < S1; ++s) if (isfinite(c->best[s])) return 1;
    return 0;
}

/* ---------------------------------------------------------------- Python glue -------------- */

static void ctx_free(Ctx *c) {
    if (!c) return;
    if (c->info) {
        for (long r = 0; r < c->pairs * c->nt; ++r)
            if (c->info[r]) { free(c->info[r]->F); free(c->info[r]->FL); free(c->info[r]->FU); }
        free(c->info);
    }
    for (int r = 0; r < c->nblocks; ++r) free(c->blocks[r]);
    free(c->blocks);
    void *ptrs[] = {c->kind_mem, c->kind_count, c->degrees, c->width, c->ndiv_t, c->off_node, c->off_edge, c->p, c->w,
                    c->a, c->b, c->ein, c->eout, c->esrc, c->etgt, c->in_start, c->in_edges, c->out_start, c->out_edges,
                    c->words, c->ideal_work, c->ideal_p, c->ideal_w, c->divs, c->sub_start, c->sub, c->nodes, c->P, c->W, c->A, c->Bf, c->cost,
                    c->mem, c->comm, c->best, c->parent};
    for (size_t r = 0; r < sizeof(ptrs) / sizeof(ptrs[0]); ++r) free(ptrs[r]);
    free(c);
}

static void capsule_free(PyObject *cap) { ctx_free((Ctx *)PyCapsule_GetPointer(cap, "jointdp.ctx")); }

/* a copy of a buffer of exactly `bytes` bytes */
static void *copy_buffer(PyObject *obj, size_t bytes, const char *name) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if ((size_t)view.len != bytes) {
        PyErr_Format(PyExc_ValueError, "jointdp: %s has %zd bytes, expected %zu", name, view.len, bytes);
        PyBuffer_Release(&view);
        return NULL;
    }
    void *out = malloc(bytes + 8);
    memcpy(out, view.buf, bytes);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *py_new(PyObject *self, PyObject *args) {
    int n, E, L, nw, nt, ndiv, nkinds, smax;
    double B, N;
    PyObject *o_kmem, *o_kcount, *o_deg, *o_width, *o_p, *o_w, *o_a, *o_b, *o_ein, *o_eout, *o_src, *o_tgt, *o_words,
        *o_iwork, *o_ip, *o_iw, *o_divs;
    if (!PyArg_ParseTuple(args, "iiiiiiiiddOOOOOOOOOOOOOOOOO", &n, &E, &L, &nw, &nt, &ndiv, &nkinds, &smax, &B, &N,
                          &o_kmem, &o_kcount, &o_deg, &o_width, &o_p, &o_w, &o_a, &o_b, &o_ein, &o_eout, &o_src, &o_tgt,
                          &o_words, &o_iwork, &o_ip, &o_iw, &o_divs))
        return NULL;
    if (nkinds != 1) {
        PyErr_Format(PyExc_ValueError, "the joint DP takes one device kind, got %d", nkinds);
        return NULL;
    }
    Ctx *c = (Ctx *)calloc(1, sizeof(Ctx));
    c->rows_i = -1;
    c->n = n; c->E = E; c->L = L; c->nw = nw; c->nt = nt; c->ndiv = ndiv; c->nkinds = nkinds; c->smax = smax;
    c->ymax = smax + 1; c->B = B; c->N = N;
    c->kind_mem = (double *)copy_buffer(o_kmem, sizeof(double) * nkinds, "kind memory");
    c->kind_count = c->kind_mem ? (int *)copy_buffer(o_kcount, sizeof(int) * nkinds, "kind count") : NULL;
    if (!c->kind_count) { ctx_free(c); return NULL; }
    int k = c->kind_count[0];
    c->degrees = (int *)copy_buffer(o_deg, sizeof(int) * nt, "degrees");
    c->width = c->degrees ? (int *)copy_buffer(o_width, sizeof(int) * nt, "width") : NULL;
    c->divs = c->width ? (int *)copy_buffer(o_divs, sizeof(int) * ndiv, "divisors") : NULL;
    if (!c->divs) { ctx_free(c); return NULL; }
    c->off_node = (long *)malloc(sizeof(long) * (nt + 1));
    c->off_edge = (long *)malloc(sizeof(long) * (nt + 1));
    c->ndiv_t = (int *)malloc(sizeof(int) * (nt + 1));
    long sn = 0, se = 0;
    int wmax = 1;
    for (int ti = 0; ti < nt; ++ti) {
        c->off_node[ti] = sn; c->off_edge[ti] = se;
        sn += (long)n * c->width[ti]; se += (long)E * c->width[ti];
        if (c->width[ti] > wmax) wmax = c->width[ti];
        int cnt = 0;
        for (int q = 0; q < ndiv; ++q) if ((long)c->divs[q] * c->degrees[ti] <= k) ++cnt;
        c->ndiv_t[ti] = cnt;
    }
    c->p = (double *)copy_buffer(o_p, sizeof(double) * sn, "p");
    c->w = c->p ? (double *)copy_buffer(o_w, sizeof(double) * sn, "w") : NULL;
    c->a = c->w ? (double *)copy_buffer(o_a, sizeof(double) * sn, "a") : NULL;
    c->b = c->a ? (double *)copy_buffer(o_b, sizeof(double) * sn, "b") : NULL;
    c->ein = c->b ? (double *)copy_buffer(o_ein, sizeof(double) * se, "edge_in") : NULL;
    c->eout = c->ein ? (double *)copy_buffer(o_eout, sizeof(double) * se, "edge_out") : NULL;
    c->esrc = c->eout ? (int *)copy_buffer(o_src, sizeof(int) * E, "edge_src") : NULL;
    c->etgt = c->esrc ? (int *)copy_buffer(o_tgt, sizeof(int) * E, "edge_tgt") : NULL;
    c->words = c->etgt ? (uint64_t *)copy_buffer(o_words, sizeof(uint64_t) * (size_t)L * nw, "words") : NULL;
    c->ideal_work = c->words ? (double *)copy_buffer(o_iwork, sizeof(double) * L, "ideal_work") : NULL;
    c->ideal_p = c->ideal_work ? (double *)copy_buffer(o_ip, sizeof(double) * (size_t)nt * L, "ideal_p") : NULL;
    c->ideal_w = c->ideal_p ? (double *)copy_buffer(o_iw, sizeof(double) * (size_t)nt * L, "ideal_w") : NULL;
    if (!c->ideal_w) { ctx_free(c); return NULL; }
    /* edges by target (in) and by source (out), in edge order */
    c->in_start = (int *)calloc(n + 1, sizeof(int));
    c->out_start = (int *)calloc(n + 1, sizeof(int));
    c->in_edges = (int *)malloc(sizeof(int) * (E + 1));
    c->out_edges = (int *)malloc(sizeof(int) * (E + 1));
    for (int e = 0; e < E; ++e) { c->in_start[c->etgt[e] + 1]++; c->out_start[c->esrc[e] + 1]++; }
    for (int v = 0; v < n; ++v) { c->in_start[v + 1] += c->in_start[v]; c->out_start[v + 1] += c->out_start[v]; }
    int *fi = (int *)calloc(n + 1, sizeof(int)), *fo = (int *)calloc(n + 1, sizeof(int));
    for (int e = 0; e < E; ++e) {
        c->in_edges[c->in_start[c->etgt[e]] + fi[c->etgt[e]]++] = e;
        c->out_edges[c->out_start[c->esrc[e]] + fo[c->esrc[e]]++] = e;
    }
    free(fi); free(fo);
    /* sub-ideals (proper subsets; smaller index since ideals are sorted by size) */
    c->sub_start = (long *)malloc(sizeof(long) * (L + 1));
    long capsub = 1024, ns = 0;
    c->sub = (int *)malloc(sizeof(int) * capsub);
    for (int i = 0; i < L; ++i) {
        c->sub_start[i] = ns;
        const uint64_t *wi = c->words + (size_t)i * nw;
        for (int j = 0; j < i; ++j) {
            if (!inside(c->words + (size_t)j * nw, wi, nw)) continue;
            if (ns == capsub) { capsub *= 2; c->sub = (int *)realloc(c->sub, sizeof(int) * capsub); }
            c->sub[ns++] = j;
        }
    }
    c->sub_start[L] = ns;
    c->pairs = ns;
    c->info = (TInfo **)calloc((size_t)ns * nt + 1, sizeof(TInfo *));
    c->nodes = (int *)malloc(sizeof(int) * (n + 1));
    size_t rows = (size_t)(n + 1) * wmax;
    c->P = (double *)malloc(sizeof(double) * rows); c->W = (double *)malloc(sizeof(double) * rows);
    c->A = (double *)malloc(sizeof(double) * rows); c->Bf = (double *)malloc(sizeof(double) * rows);
    c->cost = (double *)malloc(sizeof(double) * rows); c->mem = (double *)malloc(sizeof(double) * rows);
    c->comm = (double *)malloc(sizeof(double) * (wmax + 1));
    c->best = (double *)malloc(sizeof(double) * (size_t)L * (smax + 1));
    c->parent = (int *)calloc((size_t)L * (smax + 1) * 4, sizeof(int));
    return PyCapsule_New(c, "jointdp.ctx", capsule_free);
}

static PyObject *py_feasible(PyObject *self, PyObject *args) {
    PyObject *cap;
    double target, deadline;
    int strict;
    if (!PyArg_ParseTuple(args, "Odpd", &cap, &target, &strict, &deadline)) return NULL;
    Ctx *c = (Ctx *)PyCapsule_GetPointer(cap, "jointdp.ctx");
    if (!c) return NULL;
    double nxt = INFINITY;
    int st = pass(c, target, strict, deadline, &nxt);
    if (st == -1) return NULL;
    if (st == -2) return Py_BuildValue("(sdO)", "timeout", nxt, Py_None);
    if (st == 0) return Py_BuildValue("(sdO)", "none", nxt, Py_None);
    /* backtrack: from the empty ideal with its least s up to the whole graph */
    int S1 = c->smax + 1, j = 0, s = 0, full = c->L - 1;
    while (!isfinite(c->best[s])) ++s;
    PyObject *steps = PyList_New(0);
    while (j != full) {
        int *pp = c->parent + ((size_t)j * S1 + s) * 4;
        PyObject *step = Py_BuildValue("(iiiii)", pp[0], j, s, pp[2], pp[3]);
        if (!step || PyList_Append(steps, step) < 0) { Py_XDECREF(step); Py_DECREF(steps); return NULL; }
        Py_DECREF(step);
        int i = pp[0], sp = pp[1];
        j = i; s = sp;
    }
    PyObject *out = Py_BuildValue("(sdO)", "found", nxt, steps);
    Py_DECREF(steps);
    return out;
}

static PyObject *py_stats(PyObject *self, PyObject *args) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
    Ctx *c = (Ctx *)PyCapsule_GetPointer(cap, "jointdp.ctx");
    if (!c) return NULL;
    return Py_BuildValue("{s:l,s:l,s:l}", "pairs", c->pairs, "tables", c->tables, "knapsacks", c->knapsacks);
}

static PyObject *py_knapsack(PyObject *self, PyObject *args) {
    PyObject *o_cost, *o_mem;
    int m, W;
    double M;
    if (!PyArg_ParseTuple(args, "iiOOd", &m, &W, &o_cost, &o_mem, &M)) return NULL;
    double *cost = (double *)copy_buffer(o_cost, sizeof(double) * (size_t)m * W, "cost");
    if (!cost) return NULL;
    double *mem = (double *)copy_buffer(o_mem, sizeof(double) * (size_t)m * W, "mem");
    if (!mem) { free(cost); return NULL; }
    double v = knap(m, W, cost, mem, M, 0, NULL, NULL);
    free(cost); free(mem);
    return PyFloat_FromDouble(v);
}

static PyObject *py_count_pairs(PyObject *self, PyObject *args) {
    PyObject *o_words;
    int L, nw;
    long cap;
    if (!PyArg_ParseTuple(args, "Oiil", &o_words, &L, &nw, &cap)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(o_words, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if ((size_t)view.len != sizeof(uint64_t) * (size_t)L * nw) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "jointdp: count_pairs: words has the wrong size");
        return NULL;
    }
    const uint64_t *words = (const uint64_t *)view.buf;
    long count = 0;
    Py_BEGIN_ALLOW_THREADS
    /* the same test as py_new's sub-ideal lists: j < i with words(j) inside words(i) */
    for (int i = 0; i < L && count <= cap; ++i) {
        const uint64_t *wi = words + (size_t)i * nw;
        for (int j = 0; j < i; ++j) count += inside(words + (size_t)j * nw, wi, nw);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLong(count > cap ? -1 : count);
}

/* ---- the column bound's pricing (milp_partition/joint/column_bound.py, _price): a two-resource multiple-choice
 * knapsack by branch and bound.  Groups g = 0..G-1 in the order given, options of group g at off[g]..off[g+1]-1 in
 * decreasing reduced value red = v - theta tm - phi mm; the bound of a branch is the Lagrangian one
 * value + v_j + suffix[g+1] + theta (cap_t - used_t - tm_j) + phi (cap_m - used_m - mm_j) = base + red_j. */
typedef struct {
    int G;
    const int64_t *off;
    const double *v, *tm, *mm, *red, *suffix, *rest_t, *rest_m;
    double cap_t, cap_m, theta, phi, best;
    long nodes, max_nodes;
    int exhausted;
    double open; /* where stopped at max_nodes: the largest bound of a branch left unexplored */
    int64_t *choice, *best_choice;
    int64_t *ring; /* the last MCKP_RING leaves that improved the best (G entries each) */
    int ring_count;
} Mckp;

#define MCKP_RING 8

static void mckp_dfs(Mckp *s, int g, double value, double used_t, double used_m) {
    if (g == s->G) {
        if (value > s->best) {
            s->best = value;
            memcpy(s->best_choice, s->choice, sizeof(int64_t) * (size_t)s->G);
            memcpy(s->ring + (size_t)(s->ring_count % MCKP_RING) * s->G, s->choice, sizeof(int64_t) * (size_t)s->G);
            s->ring_count++;
        }
        return;
    }
    double base = value + s->suffix[g + 1] + s->theta * (s->cap_t - used_t) + s->phi * (s->cap_m - used_m);
    if (++s->nodes > s->max_nodes) {
        s->exhausted = 1; /* this node's branches: at most its best option's bound (options by decreasing red) */
        if (s->off[g] < s->off[g + 1] && base + s->red[s->off[g]] > s->open) s->open = base + s->red[s->off[g]];
        return;
    }
    for (int64_t j = s->off[g]; j < s->off[g + 1]; ++j) {
        if (base + s->red[j] <= s->best) break;
        double nt = used_t + s->tm[j], nm = used_m + s->mm[j];
        if (nt + s->rest_t[g + 1] > s->cap_t || nm + s->rest_m[g + 1] > s->cap_m) continue;
        s->choice[g] = j;
        mckp_dfs(s, g + 1, value + s->v[j], nt, nm);
        if (s->exhausted) { /* the branches after j, unexplored: at most the next one's bound */
            if (j + 1 < s->off[g + 1] && base + s->red[j + 1] > s->open) s->open = base + s->red[j + 1];
            return;
        }
    }
}

static PyObject *py_mckp(PyObject *self, PyObject *args) {
    PyObject *objs[8];
    int G;
    double cap_t, cap_m, theta, phi, start;
    long max_nodes;
    if (!PyArg_ParseTuple(args, "iOOOOOOOOdddddl", &G, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &cap_t, &cap_m, &theta, &phi, &start, &max_nodes))
        return NULL;
    Py_buffer views[8];
    int got = 0;
    for (; got < 8; ++got)
        if (PyObject_GetBuffer(objs[got], &views[got], PyBUF_C_CONTIGUOUS) < 0) break;
    PyObject *out = NULL;
    if (got == 8) {
        const int64_t *off = (const int64_t *)views[0].buf;
        size_t n = (size_t)views[1].len / sizeof(double);
        int ok = (size_t)views[0].len == sizeof(int64_t) * (size_t)(G + 1) && off[G] == (int64_t)n;
        for (int r = 2; r < 5; ++r) ok = ok && (size_t)views[r].len == sizeof(double) * n;
        for (int r = 5; r < 8; ++r) ok = ok && (size_t)views[r].len == sizeof(double) * (size_t)(G + 1);
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "jointdp: mckp: arrays of the wrong size");
        } else {
            int64_t *choice = calloc((size_t)G + 1, sizeof(int64_t)), *best_choice = calloc((size_t)G + 1, sizeof(int64_t));
            int64_t *ring = calloc((size_t)(G + 1) * MCKP_RING, sizeof(int64_t));
            Mckp s = {G, off, (const double *)views[1].buf, (const double *)views[2].buf, (const double *)views[3].buf,
                      (const double *)views[4].buf, (const double *)views[5].buf, (const double *)views[6].buf,
                      (const double *)views[7].buf, cap_t, cap_m, theta, phi, start, 0, max_nodes, 0, -INFINITY,
                      choice, best_choice, ring, 0};
            int found = 0;
            Py_BEGIN_ALLOW_THREADS
            mckp_dfs(&s, 0, 0.0, 0.0, 0.0);
            Py_END_ALLOW_THREADS
            found = s.best > start;
            PyObject *lst = PyList_New(found ? G : 0);
            for (int g = 0; found && g < G; ++g) PyList_SET_ITEM(lst, g, PyLong_FromLongLong(best_choice[g]));
            int kept = s.ring_count < MCKP_RING ? s.ring_count : MCKP_RING;
            PyObject *others = PyList_New(kept);
            for (int r = 0; r < kept; ++r) { /* oldest first: the best last */
                size_t slot = (size_t)((s.ring_count - kept + r) % MCKP_RING);
                PyObject *one = PyList_New(G);
                for (int g = 0; g < G; ++g) PyList_SET_ITEM(one, g, PyLong_FromLongLong(ring[slot * G + g]));
                PyList_SET_ITEM(others, r, one);
            }
            out = Py_BuildValue("(diNNd)", s.best, s.exhausted, lst, others, s.open);
            free(choice);
            free(best_choice);
            free(ring);
        }
    }
    for (int r = 0; r < got; ++r) PyBuffer_Release(&views[r]);
    return out;
}

/* keep[i] = 0 where some option j beats option i: v_j >= v_i, tm_j <= tm_i, mm_j <= mm_i, one of them strict or
 * j < i (ties: the first stays); options already 0 in keep are ignored */
static void undominated(const double *v, const double *tm, const double *mm, uint8_t *keep, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (!keep[i]) continue;
        for (size_t j = 0; j < n; ++j) {
            if (j == i || !keep[j]) continue;
            if (v[j] >= v[i] && tm[j] <= tm[i] && mm[j] <= mm[i] &&
                (v[j] > v[i] || tm[j] < tm[i] || mm[j] < mm[i] || j < i)) {
                keep[i] = 0;
                break;
            }
        }
    }
}

/* the Lagrangian bound of the knapsack at (th, ph): sum_g max_j (v - th tm - ph mm) + th cap_t + ph cap_m */
static double lagrange_one(int G, const int64_t *off, const double *v, const double *tm, const double *mm, double th,
                           double ph, double cap_t, double cap_m) {
    double total = th * cap_t + ph * cap_m;
    for (int g = 0; g < G; ++g) {
        double best = -INFINITY;
        for (int64_t j = off[g]; j < off[g + 1]; ++j) {
            double r = v[j] - th * tm[j] - ph * mm[j];
            if (r > best) best = r;
        }
        total += best;
    }
    return total;
}

/* the Lagrangian bounds of the same knapsack for pairs (theta_p, phi_p): sum_g max_j (v - theta tm - phi mm)
 * + theta cap_t + phi cap_m, written to out[p] */
static PyObject *py_lagrange(PyObject *self, PyObject *args) {
    PyObject *objs[7];
    int G;
    double cap_t, cap_m;
    if (!PyArg_ParseTuple(args, "iOOOOOOOdd", &G, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                          &cap_t, &cap_m))
        return NULL;
    Py_buffer views[7];
    int got = 0;
    for (; got < 7; ++got)
        if (PyObject_GetBuffer(objs[got], &views[got], got == 6 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
            break;
    PyObject *out = NULL;
    if (got == 7) {
        const int64_t *off = (const int64_t *)views[0].buf;
        size_t n = (size_t)views[1].len / sizeof(double);
        size_t P = (size_t)views[4].len / sizeof(double);
        int ok = (size_t)views[0].len == sizeof(int64_t) * (size_t)(G + 1) && off[G] == (int64_t)n;
        ok = ok && (size_t)views[2].len == sizeof(double) * n && (size_t)views[3].len == sizeof(double) * n;
        ok = ok && (size_t)views[5].len == sizeof(double) * P && (size_t)views[6].len == sizeof(double) * P;
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "jointdp: lagrange: arrays of the wrong size");
        } else {
            const double *v = views[1].buf, *tm = views[2].buf, *mm = views[3].buf, *th = views[4].buf, *ph = views[5].buf;
            double *res = views[6].buf;
            Py_BEGIN_ALLOW_THREADS
            for (size_t p = 0; p < P; ++p) res[p] = lagrange_one(G, off, v, tm, mm, th[p], ph[p], cap_t, cap_m);
            Py_END_ALLOW_THREADS
            Py_INCREF(Py_None);
            out = Py_None;
        }
    }
    for (int r = 0; r < got; ++r) PyBuffer_Release(&views[r]);
    return out;
}

/* undominated() on one array of options (column_bound._undominated) */
static PyObject *py_undominated(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) return NULL;
    Py_buffer views[4];
    int got = 0;
    for (; got < 4; ++got)
        if (PyObject_GetBuffer(objs[got], &views[got], got == 3 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS) < 0)
            break;
    PyObject *out = NULL;
    if (got == 4) {
        size_t n = (size_t)views[0].len / sizeof(double);
        if ((size_t)views[1].len != sizeof(double) * n || (size_t)views[2].len != sizeof(double) * n ||
            (size_t)views[3].len != n) {
            PyErr_SetString(PyExc_ValueError, "jointdp: undominated: arrays of the wrong size");
        } else {
            const double *v = views[0].buf, *tm = views[1].buf, *mm = views[2].buf;
            uint8_t *keep = views[3].buf;
            Py_BEGIN_ALLOW_THREADS
            undominated(v, tm, mm, keep, n);
            Py_END_ALLOW_THREADS
            Py_INCREF(Py_None);
            out = Py_None;
        }
    }
    for (int r = 0; r < got; ++r) PyBuffer_Release(&views[r]);
    return out;
}

/* The whole pricing of one stage type (what column_bound._price does around mckp, in one call): the options that
 * fit alone and no other beats, the multipliers (theta, phi) with the least Lagrangian bound on a grid and three
 * finer ones around it, the chains and options in the search's order, the branch and bound.  Chains h = 0..G-1
 * hold options off[h]..off[h+1]-1 (values v, time tm, memory mm).  Returns (upper bound, exact, leaves), a leaf
 * listing per chain the option's index within its chain; the same arithmetic as the Python path. */
typedef struct {
    double key;
    int64_t index;
} KeyIx;

static int cmp_keyix(const void *x, const void *y) {
    const KeyIx *a = x, *b = y;
    if (a->key < b->key) return -1;
    if (a->key > b->key) return 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* the least bound over thetas x phis (row-major, the first least), if below *best: theta, phi, best updated */
static void grid_min(int G, const int64_t *off, const double *v, const double *tm, const double *mm, const double *ths,
                     int nt, const double *phs, int np_, double cap_t, double cap_m, double *theta, double *phi,
                     double *best, int always) {
    double least = INFINITY;
    int bi = 0, bj = 0;
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j < np_; ++j) {
            double u = lagrange_one(G, off, v, tm, mm, ths[i], phs[j], cap_t, cap_m);
            if (u < least) {
                least = u;
                bi = i;
                bj = j;
            }
        }
    if (always || least < *best) {
        *theta = ths[bi];
        *phi = phs[bj];
        *best = least;
    }
}

static PyObject *py_price(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    int G;
    double cap_t, cap_m;
    long max_nodes;
    if (!PyArg_ParseTuple(args, "iOOOOddl", &G, &objs[0], &objs[1], &objs[2], &objs[3], &cap_t, &cap_m, &max_nodes))
        return NULL;
    Py_buffer views[4];
    int got = 0;
    for (; got < 4; ++got)
        if (PyObject_GetBuffer(objs[got], &views[got], PyBUF_C_CONTIGUOUS) < 0) break;
    PyObject *out = NULL;
    if (got == 4) {
        const int64_t *off = (const int64_t *)views[0].buf;
        size_t n = (size_t)views[1].len / sizeof(double);
        int ok = G >= 1 && (size_t)views[0].len == sizeof(int64_t) * (size_t)(G + 1) && off[0] == 0 && off[G] == (int64_t)n;
        ok = ok && (size_t)views[2].len == sizeof(double) * n && (size_t)views[3].len == sizeof(double) * n;
        for (int g = 0; ok && g < G; ++g) ok = off[g] <= off[g + 1];
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "jointdp: price: arrays of the wrong size");
        } else {
            const double *v0 = views[1].buf, *t0 = views[2].buf, *m0 = views[3].buf;
            size_t N = n + 1;
            /* kept options per chain, in the original order (ix: index within the chain) */
            double *v = malloc(sizeof(double) * N), *tm = malloc(sizeof(double) * N), *mm = malloc(sizeof(double) * N);
            double *red = malloc(sizeof(double) * N);
            int64_t *ix = malloc(sizeof(int64_t) * N), *koff = malloc(sizeof(int64_t) * (size_t)(G + 1));
            uint8_t *keep = malloc(N);
            /* the search's order: chains by decreasing spread, options by decreasing reduced value */
            double *sv = malloc(sizeof(double) * N), *st = malloc(sizeof(double) * N), *sm = malloc(sizeof(double) * N);
            double *sr = malloc(sizeof(double) * N);
            int64_t *six = malloc(sizeof(int64_t) * N), *soff = malloc(sizeof(int64_t) * (size_t)(G + 1));
            int64_t *chain_of = malloc(sizeof(int64_t) * (size_t)G);
            double *suffix = malloc(sizeof(double) * (size_t)(G + 1)), *rest_t = malloc(sizeof(double) * (size_t)(G + 1));
            double *rest_m = malloc(sizeof(double) * (size_t)(G + 1));
            KeyIx *keys = malloc(sizeof(KeyIx) * (N > (size_t)G ? N : (size_t)G));
            int64_t *choice = calloc((size_t)G + 1, sizeof(int64_t)), *best_choice = calloc((size_t)G + 1, sizeof(int64_t));
            int64_t *ring = calloc((size_t)(G + 1) * MCKP_RING, sizeof(int64_t));
            double upper = -INFINITY;
            int exact = 1, kept_ring = 0, ring_count = 0;
            Py_BEGIN_ALLOW_THREADS
            size_t k = 0;
            int empty = 0;
            double sum_t = 0.0, sum_m = 0.0;
            for (int g = 0; g < G; ++g) {
                int64_t a = off[g], b = off[g + 1];
                for (int64_t i = a; i < b; ++i) keep[i] = t0[i] <= cap_t && m0[i] <= cap_m;
                undominated(v0 + a, t0 + a, m0 + a, keep + a, (size_t)(b - a));
                koff[g] = (int64_t)k;
                double least_t = INFINITY, least_m = INFINITY;
                for (int64_t i = a; i < b; ++i)
                    if (keep[i]) {
                        v[k] = v0[i];
                        tm[k] = t0[i];
                        mm[k] = m0[i];
                        ix[k] = i - a;
                        if (t0[i] < least_t) least_t = t0[i];
                        if (m0[i] < least_m) least_m = m0[i];
                        ++k;
                    }
                if ((int64_t)k == koff[g]) empty = 1;
                sum_t += least_t;
                sum_m += least_m;
            }
            koff[G] = (int64_t)k;
            if (!empty && !(sum_t > cap_t) && !(sum_m > cap_m)) {
                double scale = 1e-12;
                for (size_t i = 0; i < k; ++i)
                    if (fabs(v[i]) > scale) scale = fabs(v[i]);
                double grid[15];
                grid[0] = 0.0;
                for (int q = 0; q < 14; ++q) grid[q + 1] = scale * pow(2.0, -12.0 + 1.5 * q);
                double theta = 0.0, phi = 0.0, root = INFINITY;
                grid_min(G, koff, v, tm, mm, grid, 15, grid, 15, cap_t, cap_m, &theta, &phi, &root, 1);
                const double widths[3] = {1.0, 0.5, 0.25};
                for (int w = 0; w < 3; ++w) {
                    double ft[5], fp[5];
                    int nt = 1, np_ = 1;
                    ft[0] = 0.0;
                    fp[0] = 0.0;
                    if (theta > 0) {
                        nt = 5;
                        for (int q = 0; q < 5; ++q) ft[q] = theta * pow(2.0, -widths[w] + 0.5 * widths[w] * q);
                    }
                    if (phi > 0) {
                        np_ = 5;
                        for (int q = 0; q < 5; ++q) fp[q] = phi * pow(2.0, -widths[w] + 0.5 * widths[w] * q);
                    }
                    grid_min(G, koff, v, tm, mm, ft, nt, fp, np_, cap_t, cap_m, &theta, &phi, &root, 0);
                }
                for (size_t i = 0; i < k; ++i) red[i] = v[i] - theta * tm[i] - phi * mm[i];
                for (int g = 0; g < G; ++g) {
                    double hi = -INFINITY, lo = INFINITY;
                    for (int64_t i = koff[g]; i < koff[g + 1]; ++i) {
                        if (red[i] > hi) hi = red[i];
                        if (red[i] < lo) lo = red[i];
                    }
                    keys[g].key = -(hi - lo);
                    keys[g].index = g;
                }
                qsort(keys, (size_t)G, sizeof(KeyIx), cmp_keyix);
                for (int g = 0; g < G; ++g) chain_of[g] = keys[g].index;
                size_t p = 0;
                double tops[G + 1], least_t[G], least_m[G];
                for (int g = 0; g < G; ++g) {
                    int64_t h = chain_of[g], a = koff[h], b = koff[h + 1];
                    soff[g] = (int64_t)p;
                    for (int64_t i = a; i < b; ++i) {
                        keys[i - a].key = -red[i];
                        keys[i - a].index = i - a;
                    }
                    qsort(keys, (size_t)(b - a), sizeof(KeyIx), cmp_keyix);
                    double top = -INFINITY, lt = INFINITY, lm = INFINITY;
                    for (int64_t r = 0; r < b - a; ++r) {
                        int64_t i = a + keys[r].index;
                        sv[p] = v[i];
                        st[p] = tm[i];
                        sm[p] = mm[i];
                        sr[p] = red[i];
                        six[p] = ix[i];
                        if (red[i] > top) top = red[i];
                        if (tm[i] < lt) lt = tm[i];
                        if (mm[i] < lm) lm = mm[i];
                        ++p;
                    }
                    tops[g] = top;
                    least_t[g] = lt;
                    least_m[g] = lm;
                }
                soff[G] = (int64_t)p;
                tops[G] = 0.0;
                double acc = 0.0;
                for (int g = G; g >= 0; --g) {
                    acc += tops[g];
                    suffix[g] = acc;
                }
                suffix[G] = 0.0;
                rest_t[G] = rest_m[G] = 0.0;
                double at = 0.0, am = 0.0;
                for (int g = G - 1; g >= 0; --g) {
                    at = g == G - 1 ? least_t[g] : at + least_t[g];
                    am = g == G - 1 ? least_m[g] : am + least_m[g];
                    rest_t[g] = at;
                    rest_m[g] = am;
                }
                Mckp s = {G, soff, sv, st, sm, sr, suffix, rest_t, rest_m, cap_t, cap_m, theta, phi, -INFINITY, 0,
                          max_nodes, 0, -INFINITY, choice, best_choice, ring, 0};
                mckp_dfs(&s, 0, 0.0, 0.0, 0.0);
                /* stopped early: every leaf is explored (at most best) or under an open branch's bound */
                upper = s.exhausted ? fmin(root, fmax(s.best, s.open)) : s.best;
                exact = !s.exhausted;
                ring_count = s.ring_count;
                kept_ring = ring_count < MCKP_RING ? ring_count : MCKP_RING;
            }
            Py_END_ALLOW_THREADS
            PyObject *leaves = PyList_New(kept_ring);
            for (int r = 0; r < kept_ring; ++r) { /* oldest first: the best last; per chain in the chains' order */
                size_t slot = (size_t)((ring_count - kept_ring + r) % MCKP_RING);
                PyObject *one = PyList_New(G);
                for (int g = 0; g < G; ++g) PyList_SET_ITEM(one, g, NULL);
                for (int g = 0; g < G; ++g)
                    PyList_SET_ITEM(one, chain_of[g], PyLong_FromLongLong(six[ring[slot * G + g]]));
                PyList_SET_ITEM(leaves, r, one);
            }
            out = Py_BuildValue("(dON)", upper, exact ? Py_True : Py_False, leaves);
            free(v), free(tm), free(mm), free(red), free(ix), free(koff), free(keep), free(sv), free(st), free(sm);
            free(sr), free(six), free(soff), free(chain_of), free(suffix), free(rest_t), free(rest_m), free(keys);
            free(choice), free(best_choice), free(ring);
        }
    }
    for (int r = 0; r < got; ++r) PyBuffer_Release(&views[r]);
    return out;
}

static PyMethodDef methods[] = {
    {"count_pairs", py_count_pairs, METH_VARARGS,
     "count_pairs(words, L, nw, cap) -> the pairs (ideal, proper sub-ideal), or -1 past cap"},
    {"new", py_new, METH_VARARGS, "new(...) -> context: the indexed problem (see milp_partition/joint/native.py)"},
    {"feasible", py_feasible, METH_VARARGS, "feasible(ctx, target, strict, deadline) -> (status, next, steps)"},
    {"stats", py_stats, METH_VARARGS, "stats(ctx) -> counts of pairs, stage tables and knapsacks"},
    {"undominated", py_undominated, METH_VARARGS,
     "undominated(v, tm, mm, keep) -> None: clears keep (uint8) where another kept option beats the option"},
    {"lagrange", py_lagrange, METH_VARARGS,
     "lagrange(G, off, v, tm, mm, thetas, phis, out, cap_t, cap_m) -> None: the Lagrangian bound per (theta, phi) pair"},
    {"mckp", py_mckp, METH_VARARGS,
     "mckp(G, off, v, tm, mm, red, suffix, rest_t, rest_m, cap_t, cap_m, theta, phi, start, max_nodes) -> "
     "(best value, exhausted, choice, the last leaves that improved the best)"},
    {"price", py_price, METH_VARARGS,
     "price(G, off, v, tm, mm, cap_t, cap_m, max_nodes) -> (upper bound, exact, leaves): column_bound._price in one call"},
    {"knapsack", py_knapsack, METH_VARARGS, "knapsack(m, width, cost, mem, M) -> least cost (the exact knapsack)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jointdp", "The joint DP's feasibility pass in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__jointdp(void) { return PyModule_Create(&module); }
