"""Site Jacobians for many environments at once, from each environment's ``cdof``.

``mj_jacSite`` is a per-(env, site) Python call; after ``mj_kinematics`` + ``mj_comPos`` the
whole Jacobian is a function of three small arrays (``cdof``, ``subtree_com`` and
``site_xpos``), so the pool copies those once per environment and evaluates every site of
every environment in a few NumPy operations. The formula is MuJoCo's ``mj_jac``: along the
dof ancestor chain of the site's body, ``jacr = cdof[:3]`` and
``jacp = cdof[3:] + cdof[:3] x (point - subtree_com[root])``; other columns are zero.
"""

import numpy as np


def chain_mask(model, site_ids):
    """``(nsite, nv)`` bool: which dofs move each site (mj_jac's backward dof walk)."""
    mask = np.zeros((len(site_ids), model.nv), dtype=bool)
    for k, sid in enumerate(site_ids):
        body = int(model.site_bodyid[sid])
        while body and not model.body_dofnum[body]:
            body = int(model.body_parentid[body])
        if not body:
            continue
        dof = int(model.body_dofadr[body] + model.body_dofnum[body] - 1)
        while dof >= 0:
            mask[k, dof] = True
            dof = int(model.dof_parentid[dof])
    return mask


def site_roots(model, site_ids):
    return np.asarray(model.body_rootid[model.site_bodyid[site_ids]], dtype=np.intp)


def jacobians(cdof, subtree_com, site_xpos, mask):
    """Batched mj_jac for points ``site_xpos (n, s, 3)`` of root-COMs ``subtree_com (n, s, 3)``.

    ``cdof`` is ``(n, nv, 6)``; returns ``jacp, jacr`` of shape ``(n, s, 3, nv)``. The
    arithmetic follows mju_cross and then adds, in MuJoCo's order, so results equal
    mj_jacSite's (bit for bit on x86-64 here; a compiler fusing multiply-adds inside MuJoCo
    could differ in the last bit, hence the tests' 1e-12 tolerance).
    """
    n, s = site_xpos.shape[:2]
    nv = cdof.shape[1]
    offset = site_xpos - subtree_com
    # one contiguous (n, 1, nv) or (n, s, 1) operand per component keeps every ufunc on
    # unit-stride memory, several times faster than strided 4-D views (bench/README.md)
    ang = [np.ascontiguousarray(cdof[:, :, k])[:, None, :] for k in range(3)]
    lin = [np.ascontiguousarray(cdof[:, :, 3 + k])[:, None, :] for k in range(3)]
    off = [np.ascontiguousarray(offset[:, :, k])[:, :, None] for k in range(3)]
    keep = mask[None]
    jacp = np.empty((n, s, 3, nv))
    jacr = np.empty((n, s, 3, nv))
    for row, (a, b) in enumerate(((1, 2), (2, 0), (0, 1))):
        # mju_cross(cdof, offset)[row], then + cdof[3 + row]: MuJoCo's order of operations
        jacp[:, :, row] = np.where(keep, (ang[a] * off[b] - ang[b] * off[a]) + lin[row], 0.0)
        jacr[:, :, row] = np.where(keep, ang[row], 0.0)
    return jacp, jacr
