/* Site and body Jacobians of many pool environments in one C call (pool/jacobian.py).
 *
 * A Python loop over environments spends most of its time in the interpreter, not in
 * MuJoCo. This loop calls MuJoCo's own mj_setState, mj_kinematics, mj_comPos and
 * mj_jacSite / mj_jacBody, so results are bit-identical to the loop a user would write
 * (which restores the whole row: kinematics reads only the parts restored here).
 *
 * MuJoCo is reached only through the function pointers in `struct mujoco_api`, taken at run
 * time from the libmujoco the Python bindings loaded: no MuJoCo header or link-time
 * dependency, so one build serves every MuJoCo version whose signatures match (3.x and
 * 4.x alike), and the model and data are always those of the library that made them.
 * It runs on the caller's thread (ctypes releases the GIL for the call) and threads of
 * its own, each with its own mjData. MuJoCo raises no error in these functions for valid
 * ids and state rows, which the Python side has checked.
 */
#include <pthread.h>
#include <stdint.h>

typedef double mjtNum;
typedef void (*set_state_fn)(const void *m, void *d, const mjtNum *state, int spec);
typedef void (*stage_fn)(const void *m, void *d);
typedef void (*jac_fn)(const void *m, const void *d, mjtNum *jacp, mjtNum *jacr, int id);

struct mujoco_api {
  set_state_fn set_state;
  stage_fn kinematics;
  stage_fn com_pos;
  jac_fn jac_site;
  jac_fn jac_body;
};

/* Bumped whenever a signature below changes; pool/jacobian.py refuses another value. */
int32_t mhr_kernels_version(void) { return 3; }

/* One Jacobian query: what every thread shares. */
struct query {
  const struct mujoco_api *api;
  jac_fn jac;
  const void *m;
  const mjtNum *state;
  int64_t width;
  int32_t nparts;
  const int64_t *part_offset;
  const int32_t *part_spec;
  const int64_t *rows;
  const int64_t *slots;
  int64_t n;
  const int32_t *objs;
  int32_t nobj;
  int32_t nv;
  mjtNum *jacp;
  mjtNum *jacr;
  int64_t chunk;
  int64_t next;  /* first row not yet claimed; threads take chunks with an atomic add */
};

struct lane {
  struct query *q;
  void *d;
};

/* Rows [lo, hi) on one mjData. */
static void run_rows(const struct query *q, void *d, int64_t lo, int64_t hi) {
  int64_t block = 3 * (int64_t)q->nv;
  for (int64_t k = lo; k < hi; k++) {
    const mjtNum *row = q->state + q->rows[k] * q->width;
    for (int32_t p = 0; p < q->nparts; p++) {
      q->api->set_state(q->m, d, row + q->part_offset[p], q->part_spec[p]);
    }
    q->api->kinematics(q->m, d);
    q->api->com_pos(q->m, d);
    for (int32_t o = 0; o < q->nobj; o++) {
      int64_t at = (q->slots[k] * q->nobj + o) * block;
      q->jac(q->m, d, q->jacp + at, q->jacr + at, q->objs[o]);
    }
  }
}

/* Claims chunks until none is left, so a thread slowed by other processes takes fewer. */
static void *drain(void *arg) {
  struct lane *lane = arg;
  struct query *q = lane->q;
  for (;;) {
    int64_t lo = __atomic_fetch_add(&q->next, q->chunk, __ATOMIC_RELAXED);
    if (lo >= q->n) {
      return NULL;
    }
    run_rows(q, lane->d, lo, lo + q->chunk < q->n ? lo + q->chunk : q->n);
  }
}

/* For each k < n: restore the parts of state row rows[k] (`width` values per row) that
 * kinematics reads (part p: the mj_setState spec part_spec[p], starting part_offset[p]
 * values into the row), run the position stages, and write the Jacobian of every object
 * into output block slots[k] (jacp and jacr are (n_out, nobj, 3, nv), C order).
 * `kind` 0: sites, 1: bodies. Runs on the caller's thread and nthread - 1 more, datas[t]
 * being thread t's mjData; where a thread cannot be started, the others do its share. */
void mhr_jacobians(const struct mujoco_api *api, int32_t kind, const void *m,
                   void *const *datas, int32_t nthread,
                   const mjtNum *state, int64_t width,
                   int32_t nparts, const int64_t *part_offset, const int32_t *part_spec,
                   const int64_t *rows, const int64_t *slots, int64_t n,
                   const int32_t *objs, int32_t nobj, int32_t nv,
                   mjtNum *jacp, mjtNum *jacr) {
  enum { MAX_THREADS = 256, CHUNKS_PER_THREAD = 4, MIN_CHUNK = 8 };
  struct query q = {api, kind ? api->jac_body : api->jac_site, m, state, width, nparts,
                    part_offset, part_spec, rows, slots, n, objs, nobj, nv, jacp, jacr, 0, 0};
  struct lane lanes[MAX_THREADS];
  pthread_t threads[MAX_THREADS];
  int started[MAX_THREADS] = {0};
  if (nthread < 1) nthread = 1;
  if (nthread > MAX_THREADS) nthread = MAX_THREADS;
  if (n < (int64_t)nthread * MIN_CHUNK) nthread = (int32_t)(n / MIN_CHUNK) + 1;
  q.chunk = n / ((int64_t)nthread * CHUNKS_PER_THREAD);
  if (q.chunk < MIN_CHUNK) q.chunk = MIN_CHUNK;
  for (int32_t t = 0; t < nthread; t++) {
    lanes[t].q = &q;
    lanes[t].d = datas[t];
    if (t > 0) {
      started[t] = pthread_create(&threads[t], NULL, drain, &lanes[t]) == 0;
    }
  }
  drain(&lanes[0]);
  for (int32_t t = 1; t < nthread; t++) {
    if (started[t]) pthread_join(threads[t], NULL);
  }
}
