/* The timing harness of `cargo xtask export-bench`: rfx's exported C against CasADi's generated
 * C and the hand-written gcc peers, all called directly from C in one process.
 *
 *   harness OUT.json [ROUNDS]
 *
 * Cases: K4 sin(x*2)+y, K5 the 10-op chain and K6 the PID clip, at n = 1 and n = 65,536, as
 * the peers script (../shared/peers/peers.py) defines them. Variants of a case:
 *   rfx     `rfx export --lang c` (exact mode), compiled without -ffast-math;
 *   casadi  CasADi's generated C (casadi_real=float), n = 1 only (CasADi unrolls SX functions
 *           element by element, so n = 65,536 would be 65,536 copies of the expression);
 *   gcc     the hand-written loop, -O3 -march=native -ffast-math -fopenmp-simd.
 * The build defines HAVE_RFX_K4, HAVE_RFX_K5 (exports of kernels with sin and cos) and
 * HAVE_CASADI for the variants it could produce; K6's export is always there.
 *
 * Method (the peers script's, in one process): inputs are random non-zero floats in
 * +-[0.1, 2.0); calls rotate over max(4, 2^18 / n) input and output sets (one set at n <= 16),
 * shared by all variants of a case. A sample is one batch of back-to-back calls (at least
 * 50 us, a multiple of the number of sets) timed with clock_gettime(CLOCK_MONOTONIC), divided
 * by its calls. The variants alternate batch by batch (round r starts with variant r mod V),
 * so load on the machine hits all of them alike; each variant's figure is the median of its
 * samples, and each ratio is given both as the ratio of two medians and as the median of the
 * per-round ratios. Each batch is also timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID),
 * which leaves out the time the process waited for a core: on a loaded machine long batches
 * are preempted more often than short ones, and the CPU-time medians show how much that moved
 * the wall-clock ones. Before timing, every variant's output on every set is compared with a
 * double-precision reference; an error above 1e-4 stops the run (exit 1). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rfx_k6_1.h"
#include "rfx_k6_65536.h"
#ifdef HAVE_RFX_K4
#include "rfx_k4_1.h"
#include "rfx_k4_65536.h"
#endif
#ifdef HAVE_RFX_K5
#include "rfx_k5_1.h"
#include "rfx_k5_65536.h"
#endif

typedef int (*rfx2_fn)(const float *, const float *, float *, void *);
typedef int (*rfx3_fn)(const float *, const float *, const float *, float *, void *);
typedef int (*casadi_fn)(const float **, float **, long long *, float *, int);
typedef void (*gcc_fn)(float *restrict, const float *restrict, const float *restrict,
                       const float *restrict, float *restrict, long);

void gcc_k4(float *restrict, const float *restrict, const float *restrict, const float *restrict,
            float *restrict, long);
void gcc_k5(float *restrict, const float *restrict, const float *restrict, const float *restrict,
            float *restrict, long);
void gcc_k6(float *restrict, const float *restrict, const float *restrict, const float *restrict,
            float *restrict, long);
#ifdef HAVE_CASADI
int K4_1(const float **, float **, long long *, float *, int);
int K5_1(const float **, float **, long long *, float *, int);
int K6_1(const float **, float **, long long *, float *, int);
#endif

/* CasADi's scratch: generous for these functions (xtask checks their sizes against it). */
#define CASADI_SCRATCH 256
#define MAX_VARIANTS 3
#define MAX_ERR 1e-4
#define TARGET_BATCH_NS 50e3

enum abi { ABI_RFX2, ABI_RFX3, ABI_CASADI, ABI_GCC };

struct variant {
  const char *name;
  enum abi abi;
  union {
    rfx2_fn rfx2;
    rfx3_fn rfx3;
    casadi_fn casadi;
    gcc_fn gcc;
  } fn;
  size_t work_bytes;
  size_t work_align;
};

struct bench_case {
  const char *kernel;
  const char *title;
  long n;
  int n_in;
  int n_variants;
  struct variant variants[MAX_VARIANTS];
};

/* The input and output sets of one case, and each variant's scratch. */
struct sets {
  int n_sets;
  float **in[3];
  float **out;
  const float ***casadi_arg;
  float ***casadi_res;
  void *work[MAX_VARIANTS];
  long long casadi_iw[CASADI_SCRATCH];
  float casadi_w[CASADI_SCRATCH];
};

struct stats {
  double med_ns, p10_ns, p90_ns, min_ns, med_cpu_ns, max_abs_err;
  long batch;
};

/* One batch's elapsed wall-clock and thread CPU time. */
struct elapsed {
  double wall_ns, cpu_ns;
};

static double clock_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : (x > y);
}

static void *alloc_or_die(size_t align, size_t bytes) {
  void *p = NULL;
  if (bytes == 0) bytes = 1;
  if (align < sizeof(void *)) align = sizeof(void *);
  if (posix_memalign(&p, align, bytes) != 0) {
    fprintf(stderr, "harness: out of memory\n");
    exit(2);
  }
  memset(p, 0, bytes);
  return p;
}

/* The peers script's inputs: uniform in +-[0.1, 2.0) (xorshift64, fixed seed). */
static uint64_t rng_state = 88172645463325252ULL;
static float random_input(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  float u = (float)((rng_state >> 40) & 0xFFFFFF) / 16777216.0f;
  float x = u * 3.8f - 1.9f;
  return x >= 0 ? x + 0.1f : x - 0.1f;
}

static int n_sets_for(long n) {
  if (n <= 16) return 1;
  long q = (1L << 18) / n;
  return q > 4 ? (int)q : 4;
}

static double reference(const char *kernel, const float *const *in, long i) {
  double x = in[0][i], y = in[1] ? in[1][i] : 0.0;
  if (!strcmp(kernel, "K4")) return sin(x * 2.0) + y;
  if (!strcmp(kernel, "K5")) return ((x * 1.5 + y) * 0.5 - sin(x)) * cos(y) + exp(-x * x);
  double v = 1.2 * x + 0.3 * y + 0.05 * (double)in[2][i];
  return v > 1.0 ? 1.0 : (v < -1.0 ? -1.0 : v);
}

static struct sets *make_sets(const struct bench_case *c) {
  struct sets *s = alloc_or_die(64, sizeof *s);
  s->n_sets = n_sets_for(c->n);
  for (int j = 0; j < 3; j++) s->in[j] = alloc_or_die(64, sizeof(float *) * (size_t)s->n_sets);
  s->out = alloc_or_die(64, sizeof(float *) * (size_t)s->n_sets);
  s->casadi_arg = alloc_or_die(64, sizeof(float **) * (size_t)s->n_sets);
  s->casadi_res = alloc_or_die(64, sizeof(float **) * (size_t)s->n_sets);
  for (int k = 0; k < s->n_sets; k++) {
    for (int j = 0; j < 3; j++) {
      if (j >= c->n_in) {
        s->in[j][k] = NULL;
        continue;
      }
      s->in[j][k] = alloc_or_die(64, sizeof(float) * (size_t)c->n);
      for (long i = 0; i < c->n; i++) s->in[j][k][i] = random_input();
    }
    s->out[k] = alloc_or_die(64, sizeof(float) * (size_t)c->n);
    s->casadi_arg[k] = alloc_or_die(64, sizeof(float *) * 3);
    s->casadi_res[k] = alloc_or_die(64, sizeof(float *));
    for (int j = 0; j < 3; j++) s->casadi_arg[k][j] = s->in[j][k];
    s->casadi_res[k][0] = s->out[k];
  }
  for (int v = 0; v < c->n_variants; v++)
    s->work[v] = alloc_or_die(c->variants[v].work_align, c->variants[v].work_bytes);
  return s;
}

static void free_sets(const struct bench_case *c, struct sets *s) {
  for (int k = 0; k < s->n_sets; k++) {
    for (int j = 0; j < c->n_in; j++) free(s->in[j][k]);
    free(s->out[k]);
    free((void *)s->casadi_arg[k]);
    free(s->casadi_res[k]);
  }
  for (int j = 0; j < 3; j++) free(s->in[j]);
  free(s->out);
  free((void *)s->casadi_arg);
  free(s->casadi_res);
  for (int v = 0; v < c->n_variants; v++) free(s->work[v]);
  free(s);
}

/* `calls` back-to-back calls of one variant, rotating over the sets; returns the elapsed times
 * and the return codes or-ed in *status. The loop is the same for every ABI but the call. */
static struct elapsed run_batch(const struct variant *v, struct sets *s, void *work, long n,
                                long calls, int *status) {
  int k = 0, rc = 0;
  double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
  switch (v->abi) {
  case ABI_RFX2:
    for (long j = 0; j < calls; j++) {
      rc |= v->fn.rfx2(s->in[0][k], s->in[1][k], s->out[k], work);
      if (++k == s->n_sets) k = 0;
    }
    break;
  case ABI_RFX3:
    for (long j = 0; j < calls; j++) {
      rc |= v->fn.rfx3(s->in[0][k], s->in[1][k], s->in[2][k], s->out[k], work);
      if (++k == s->n_sets) k = 0;
    }
    break;
  case ABI_CASADI:
    for (long j = 0; j < calls; j++) {
      rc |= v->fn.casadi(s->casadi_arg[k], s->casadi_res[k], s->casadi_iw, s->casadi_w, 0);
      if (++k == s->n_sets) k = 0;
    }
    break;
  case ABI_GCC:
    for (long j = 0; j < calls; j++) {
      v->fn.gcc(s->out[k], s->in[0][k], s->in[1][k], s->in[2][k], s->casadi_w, n);
      if (++k == s->n_sets) k = 0;
    }
    break;
  }
  struct elapsed e;
  e.wall_ns = clock_ns(CLOCK_MONOTONIC) - t0;
  e.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  *status = rc;
  return e;
}

/* The largest absolute error of one variant over all sets, against the f64 reference. */
static double check_variant(const struct bench_case *c, const struct variant *v, struct sets *s,
                            void *work) {
  double worst = 0.0;
  for (int k = 0; k < s->n_sets; k++) {
    int status = 0;
    memset(s->out[k], 0xff, sizeof(float) * (size_t)c->n); /* NaN: an unwritten output fails */
    /* One call on set k: rotate the sets so that set k comes first. */
    struct sets one = *s;
    float *in_k[3][1] = {{s->in[0][k]}, {s->in[1][k]}, {s->in[2][k]}};
    float *out_k[1] = {s->out[k]};
    const float **arg_k[1] = {s->casadi_arg[k]};
    float **res_k[1] = {s->casadi_res[k]};
    one.n_sets = 1;
    for (int j = 0; j < 3; j++) one.in[j] = in_k[j];
    one.out = out_k;
    one.casadi_arg = arg_k;
    one.casadi_res = res_k;
    run_batch(v, &one, work, c->n, 1, &status);
    if (status != 0) {
      fprintf(stderr, "harness: %s %s n=%ld returned %d\n", v->name, c->kernel, c->n, status);
      exit(1);
    }
    const float *in_ptrs[3] = {s->in[0][k], s->in[1][k], s->in[2][k]};
    for (long i = 0; i < c->n; i++) {
      double err = fabs((double)s->out[k][i] - reference(c->kernel, in_ptrs, i));
      if (!(err <= worst)) worst = err; /* NaN propagates into worst */
    }
  }
  return worst;
}

static double median_of(double *xs, long count) {
  qsort(xs, (size_t)count, sizeof(double), cmp_double);
  return count % 2 ? xs[count / 2] : 0.5 * (xs[count / 2 - 1] + xs[count / 2]);
}

/* Times every variant of one case, alternating batch by batch; fills stats and the per-round
 * ratio of each variant to variant 0 (`paired`). */
static void time_case(const struct bench_case *c, int rounds, struct stats *st, double *paired) {
  struct sets *s = make_sets(c);
  int nv = c->n_variants, status = 0;
  long batch[MAX_VARIANTS];
  for (int v = 0; v < nv; v++) {
    st[v].max_abs_err = check_variant(c, &c->variants[v], s, s->work[v]);
    if (!(st[v].max_abs_err <= MAX_ERR)) {
      fprintf(stderr, "harness: %s %s n=%ld: error %g against the f64 reference\n",
              c->variants[v].name, c->kernel, c->n, st[v].max_abs_err);
      exit(1);
    }
    run_batch(&c->variants[v], s, s->work[v], c->n, 2L * s->n_sets, &status);
    /* Calibration: calls for 2 ms of CPU time (time spent waiting for a core would shorten
       the batches), then batches of at least TARGET_BATCH_NS. */
    long calls = s->n_sets;
    double el = 0.0;
    while (el < 2e6) {
      calls *= 2;
      el = run_batch(&c->variants[v], s, s->work[v], c->n, calls, &status).cpu_ns;
    }
    double per_call = el / (double)calls;
    long b = per_call >= TARGET_BATCH_NS ? 1 : (long)ceil(TARGET_BATCH_NS / per_call);
    batch[v] = (b + s->n_sets - 1) / s->n_sets * s->n_sets;
    st[v].batch = batch[v];
  }
  double *samples = alloc_or_die(64, sizeof(double) * (size_t)(nv * rounds));
  double *cpu_samples = alloc_or_die(64, sizeof(double) * (size_t)(nv * rounds));
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < nv; i++) {
      int v = (r + i) % nv;
      struct elapsed el = run_batch(&c->variants[v], s, s->work[v], c->n, batch[v], &status);
      samples[v * rounds + r] = el.wall_ns / (double)batch[v];
      cpu_samples[v * rounds + r] = el.cpu_ns / (double)batch[v];
    }
  double *tmp = alloc_or_die(64, sizeof(double) * (size_t)rounds);
  for (int v = 0; v < nv; v++) {
    for (int r = 0; r < rounds; r++) tmp[r] = samples[v * rounds + r] / samples[r];
    paired[v] = median_of(tmp, rounds);
    memcpy(tmp, &samples[v * rounds], sizeof(double) * (size_t)rounds);
    st[v].med_ns = median_of(tmp, rounds);
    st[v].p10_ns = tmp[rounds / 10];
    st[v].p90_ns = tmp[(rounds * 9) / 10];
    st[v].min_ns = tmp[0];
    st[v].med_cpu_ns = median_of(&cpu_samples[v * rounds], rounds);
  }
  free(tmp);
  free(cpu_samples);
  free(samples);
  free_sets(c, s);
}

#if defined(HAVE_RFX_K4) || defined(HAVE_RFX_K5)
static struct variant rfx2(const char *name, rfx2_fn f, size_t bytes, size_t align) {
  struct variant v = {name, ABI_RFX2, {.rfx2 = f}, bytes, align};
  return v;
}
#endif
static struct variant rfx3(const char *name, rfx3_fn f, size_t bytes, size_t align) {
  struct variant v = {name, ABI_RFX3, {.rfx3 = f}, bytes, align};
  return v;
}
static struct variant gcc(gcc_fn f) {
  struct variant v = {"gcc", ABI_GCC, {.gcc = f}, 0, 1};
  return v;
}
#ifdef HAVE_CASADI
static struct variant casadi(casadi_fn f) {
  struct variant v = {"casadi", ABI_CASADI, {.casadi = f}, 0, 1};
  return v;
}
#endif

/* The cases, variant 0 always rfx's export. */
static int make_cases(struct bench_case *cases) {
  int count = 0;
  const long sizes[2] = {1, 65536};
  for (int si = 0; si < 2; si++) {
    long n = sizes[si];
    struct bench_case *c;
#ifdef HAVE_RFX_K4
    c = &cases[count++];
    *c = (struct bench_case){"K4", "sin(x*2)+y", n, 2, 0, {{0}}};
    c->variants[c->n_variants++] =
        n == 1 ? rfx2("rfx", rfx_k4_1, RFX_K4_1_WORK_BYTES, RFX_K4_1_WORK_ALIGN)
               : rfx2("rfx", rfx_k4_65536, RFX_K4_65536_WORK_BYTES, RFX_K4_65536_WORK_ALIGN);
#ifdef HAVE_CASADI
    if (n == 1) c->variants[c->n_variants++] = casadi(K4_1);
#endif
    c->variants[c->n_variants++] = gcc(gcc_k4);
#endif
#ifdef HAVE_RFX_K5
    c = &cases[count++];
    *c = (struct bench_case){"K5", "10-op chain", n, 2, 0, {{0}}};
    c->variants[c->n_variants++] =
        n == 1 ? rfx2("rfx", rfx_k5_1, RFX_K5_1_WORK_BYTES, RFX_K5_1_WORK_ALIGN)
               : rfx2("rfx", rfx_k5_65536, RFX_K5_65536_WORK_BYTES, RFX_K5_65536_WORK_ALIGN);
#ifdef HAVE_CASADI
    if (n == 1) c->variants[c->n_variants++] = casadi(K5_1);
#endif
    c->variants[c->n_variants++] = gcc(gcc_k5);
#endif
    c = &cases[count++];
    *c = (struct bench_case){"K6", "PID clip", n, 3, 0, {{0}}};
    c->variants[c->n_variants++] =
        n == 1 ? rfx3("rfx", rfx_k6_1, RFX_K6_1_WORK_BYTES, RFX_K6_1_WORK_ALIGN)
               : rfx3("rfx", rfx_k6_65536, RFX_K6_65536_WORK_BYTES, RFX_K6_65536_WORK_ALIGN);
#ifdef HAVE_CASADI
    if (n == 1) c->variants[c->n_variants++] = casadi(K6_1);
#endif
    c->variants[c->n_variants++] = gcc(gcc_k6);
  }
  return count;
}

static void write_case_json(FILE *f, const struct bench_case *c, const struct stats *st,
                            const double *paired, int n_sets, int first) {
  fprintf(f, "%s\n    {\"kernel\": \"%s\", \"title\": \"%s\", \"n\": %ld, \"sets\": %d, \"variants\": [",
          first ? "" : ",", c->kernel, c->title, c->n, n_sets);
  for (int v = 0; v < c->n_variants; v++)
    fprintf(f,
            "%s\n      {\"name\": \"%s\", \"med_ns\": %.4f, \"p10_ns\": %.4f, \"p90_ns\": %.4f, "
            "\"min_ns\": %.4f, \"med_cpu_ns\": %.4f, \"batch\": %ld, \"max_abs_err\": %.3g, "
            "\"paired_ratio_to_rfx\": %.4f}",
            v ? "," : "", c->variants[v].name, st[v].med_ns, st[v].p10_ns, st[v].p90_ns,
            st[v].min_ns, st[v].med_cpu_ns, st[v].batch, st[v].max_abs_err, paired[v]);
  fprintf(f, "\n    ]}");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: harness OUT.json [ROUNDS]\n");
    return 2;
  }
  int rounds = argc > 2 ? atoi(argv[2]) : 201;
  if (rounds < 5) {
    fprintf(stderr, "harness: ROUNDS must be at least 5\n");
    return 2;
  }
  FILE *json = fopen(argv[1], "w");
  if (!json) {
    perror(argv[1]);
    return 2;
  }
  struct bench_case cases[8];
  int count = make_cases(cases);
  fprintf(json, "{\"rounds\": %d, \"cases\": [", rounds);
  printf("%-4s %-12s %6s %-7s %12s %12s %12s %10s %10s %12s\n", "", "kernel", "n", "variant",
         "median ns", "p10 ns", "p90 ns", "/ rfx", "paired", "CPU ns");
  for (int i = 0; i < count; i++) {
    struct stats st[MAX_VARIANTS];
    double paired[MAX_VARIANTS];
    time_case(&cases[i], rounds, st, paired);
    for (int v = 0; v < cases[i].n_variants; v++)
      printf("%-4s %-12s %6ld %-7s %12.3f %12.3f %12.3f %10.3f %10.3f %12.3f\n", cases[i].kernel,
             cases[i].title, cases[i].n, cases[i].variants[v].name, st[v].med_ns, st[v].p10_ns,
             st[v].p90_ns, st[v].med_ns / st[0].med_ns, paired[v], st[v].med_cpu_ns);
    fflush(stdout);
    write_case_json(json, &cases[i], st, paired, n_sets_for(cases[i].n), i == 0);
  }
  fprintf(json, "\n  ]}\n");
  fclose(json);
  return 0;
}
