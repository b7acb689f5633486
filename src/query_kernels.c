/* Site and body Jacobians of many pool environments in one C call (pool/native.py).
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
 * The caller releases the GIL (ctypes does) and runs one call per thread, each with its
 * own mjData.
 */
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

/* Bumped whenever a signature below changes; pool/native.py refuses another value. */
int32_t mhr_kernels_version(void) { return 2; }

/* For each k < n: restore the parts of state row rows[k] (`width` values per row) that
 * kinematics reads (part p: the mj_setState spec part_spec[p], starting part_offset[p]
 * values into the row), run the position stages, and write the Jacobian of every object
 * into output block slots[k] (jacp and jacr are (n_out, nobj, 3, nv), C order).
 * `kind` 0: sites, 1: bodies. */
void mhr_jacobians(const struct mujoco_api *api, int32_t kind, const void *m, void *d,
                   const mjtNum *state, int64_t width,
                   int32_t nparts, const int64_t *part_offset, const int32_t *part_spec,
                   const int64_t *rows, const int64_t *slots, int64_t n,
                   const int32_t *objs, int32_t nobj, int32_t nv,
                   mjtNum *jacp, mjtNum *jacr) {
  jac_fn jac = kind ? api->jac_body : api->jac_site;
  int64_t block = 3 * (int64_t)nv;
  for (int64_t k = 0; k < n; k++) {
    const mjtNum *row = state + rows[k] * width;
    for (int32_t p = 0; p < nparts; p++) {
      api->set_state(m, d, row + part_offset[p], part_spec[p]);
    }
    api->kinematics(m, d);
    api->com_pos(m, d);
    for (int32_t o = 0; o < nobj; o++) {
      int64_t at = (slots[k] * nobj + o) * block;
      jac(m, d, jacp + at, jacr + at, objs[o]);
    }
  }
}
