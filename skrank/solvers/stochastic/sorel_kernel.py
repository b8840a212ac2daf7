"""SOREL's compiled epoch: the kernel :func:`sorel_epochs` and the pieces it calls.

One call runs several epochs of :func:`skrank.solvers.stochastic.sorel.sorel` (loss
evaluation, adaptive re-sorting, the permutahedron projection by PAV fused
with the update of the dual weights, the variance-reduced inner loop, the
reference gradient, the objective and the stopping criterion), so that
Python's overhead is ``O(1)`` per call, not per epoch.  Also here: the
inner loops of single-sample steps (:func:`_single_steps`,
:func:`_single_steps_l2`) and the cap of the dual step, the dual function's
smoothness on the current face of the permutahedron
(:func:`_face_smoothness`, from the primal curvature
:func:`_primal_curvature`).
"""

import numpy as np

from ..._jit import njit
from ...kernels.sorting import count_descents, gather_keys, keyed_scratch, sort_keyed
from ...losses import loss_derivative, loss_second_derivative, loss_value
from .sampling import INV53, LOW32, MULT, U5, U11, U12, U25, U27, build_alias, draw_index, xorshift_uniform
from .steps import soft_scalar
from .svrg import vr_batch_direction

# The face cap dual_safety / L_F assumes an exact primal step.  When the dual
# step at the cap overshoots (the objective went up and the dual move reversed
# the previous one), the cap shrinks by _CAP_SHRINK; it grows back by
# _CAP_SHRINK ** -_CAP_RECOVER per epoch whose objective went down (kin8nm
# ESRM/extremile: the step sat at the cap and oscillated).
_CAP_SHRINK = 0.8
_CAP_RECOVER = 0.1


@njit(cache=True)
def _gather_z(lam, v, eta, perm, z):
    """``z[j] = lam[i] + eta v[i]`` for ``i = perm[j]``; returns the descents and far descents."""
    for j in range(z.shape[0]):
        i = perm[j]
        z[j] = lam[i] + eta * v[i]
    return count_descents(z)


@njit(cache=True)
def _project_sorted(z, sigma, perm, lam, dlam, losses, b_wy, b_start, multi):
    """The dual step's projection from sorted ``z``, fused with the update of ``lam``.

    ``u = PAV(z - sigma)`` with unit weights and the arithmetic of
    :func:`skrank.kernels.pava._isotonic_into`: a block's weight is its number of
    samples, its value ``wy / w``, and the top block stays in registers, so
    a point that opens a new block (most of them) costs two stores.  The
    blocks of two samples or more (few: the free samples of the face) are
    listed in ``multi`` as (start, end) pairs; elsewhere ``u_j = z_j -
    sigma_j``.  Then ``lam[perm[j]] = z[j] - u[j]``, ``dlam`` the step, and
    the sums ``dual_turn = sum step * dlam_old`` and ``lam_l = sum lam *
    losses`` in sorted order.  Returns ``(number of multi-sample blocks,
    dual_turn, lam_l)``.
    """
    n = z.shape[0]
    top = 0  # closed blocks on the stack: weighted sums and first positions
    cv = z[0] - sigma[0]  # the open block: value, weight, weighted sum, first position
    cw = 1.0
    cwy = cv
    cs = 0
    for j in range(1, n):
        yj = z[j] - sigma[j]
        if not cv >= yj:
            b_wy[top] = cwy
            b_start[top] = cs
            top += 1
            cw = 1.0
            cwy = yj
            cv = yj
            cs = j
        else:
            cw = cw + 1.0
            cwy = cwy + yj
            cv = cwy / cw
            while top > 0:
                pw = float(cs - b_start[top - 1])
                pwy = b_wy[top - 1]
                if not pwy / pw >= cv:
                    break
                top -= 1
                cw = pw + cw
                cwy = pwy + cwy
                cv = cwy / cw
                cs = b_start[top]
    b_wy[top] = cwy
    b_start[top] = cs
    nb = top + 1
    # the multi-sample blocks, and their values in b_wy[:nm] (entries already read)
    nm = 0
    for blk in range(nb):
        start = b_start[blk]
        end = b_start[blk + 1] if blk + 1 < nb else n
        if end - start >= 2:
            b_wy[nm] = b_wy[blk] / float(end - start)
            multi[2 * nm] = start
            multi[2 * nm + 1] = end
            nm += 1
    dual_turn = 0.0
    lam_l = 0.0
    pos = 0
    for blk in range(nm + 1):
        stop = multi[2 * blk] if blk < nm else n
        for j in range(pos, stop):  # single-sample blocks: u_j = z_j - sigma_j
            i = perm[j]
            zj = z[j]
            new = zj - (zj - sigma[j])
            step_i = new - lam[i]
            dual_turn += step_i * dlam[i]
            dlam[i] = step_i
            lam[i] = new
            lam_l += new * losses[i]
        if blk == nm:
            break
        val = b_wy[blk]
        end = multi[2 * blk + 1]
        for j in range(stop, end):
            i = perm[j]
            new = z[j] - val
            step_i = new - lam[i]
            dual_turn += step_i * dlam[i]
            dlam[i] = step_i
            lam[i] = new
            lam_l += new * losses[i]
        pos = end
    return nm, dual_turn, lam_l


@njit(cache=True)
def _gram(rows, m, out):
    """``out = rows[:m].T @ rows[:m]`` (BLAS; ``out`` zero for ``m = 0``)."""
    if m == 0:
        out[:, :] = 0.0
    else:
        np.dot(rows[:m].T, rows[:m], out)


@njit(cache=True)
def _primal_curvature(X, t, lam, code, param, fit_intercept, H, rows):
    """``H = [X 1]^T diag(lam l''(t)) [X 1]`` (the data part of the primal Hessian).

    Only positive weights ``h_i = lam_i l''(t_i)`` enter: ``H`` is the Gram
    matrix of the rows ``sqrt(h_i) (x_i, 1)``, gathered in ``rows``.
    """
    n, d = X.shape
    m = 0
    for i in range(n):
        h = lam[i] * loss_second_derivative(code, t[i], param)
        if h <= 0.0:
            continue
        r = np.sqrt(h)
        for a in range(d):
            rows[m, a] = r * X[i, a]
        if fit_intercept:
            rows[m, d] = r
        m += 1
    _gram(rows, m, H)


@njit(cache=True)
def _face_smoothness(X, s, t, code, param, perm, multi, n_multi, H, mu, inv_tau, fit_intercept, rows,
                     M, A, msum):
    """Smoothness ``L_F`` of the dual function on the current face of the permutahedron.

    The projection's Jacobian is the within-block centring of the PAV
    blocks; with the primal step exact the dual gradient ``l(w(lam))`` then
    moves with ``P J (H + curvature I)^-1 J^T P``, ``J = diag(s l'(t)) [X 1]``
    (the intercept's curvature is ``inv_tau`` only, as in the primal step).
    Only multi-sample blocks (the samples whose weights are free on the
    face) enter, listed by :func:`_project_sorted` as (start, end) pairs of
    sorted positions in ``multi[:2 n_multi]``: ``M = (P J)^T (P J)`` is the
    Gram matrix of their rows ``g_i (x_i, 1)`` centred within each block
    (gathered in ``rows``; ``msum`` a length-``p`` scratch), so the cost is
    ``O(m d^2 + d^3)`` for ``m`` free samples.  Returns ``(L_F, m)``,
    ``L_F = 0`` at a vertex.
    """
    n, d = X.shape
    p = M.shape[0]
    free = 0
    for blk in range(n_multi):
        start = multi[2 * blk]
        end = multi[2 * blk + 1]
        m = end - start
        for a in range(p):
            msum[a] = 0.0
        for r in range(start, end):
            i = perm[r]
            g = s[i] * loss_derivative(code, t[i], param)
            row = free + r - start
            for a in range(d):
                x = g * X[i, a]
                rows[row, a] = x
                msum[a] += x
            if fit_intercept:
                rows[row, d] = g
                msum[d] += g
        for a in range(p):
            msum[a] /= m
        for r in range(free, free + m):
            for a in range(p):
                rows[r, a] -= msum[a]
        free += m
    if free == 0:
        return 0.0, 0
    _gram(rows, free, M)
    return _top_generalised_eigenvalue(M, H, mu, inv_tau, fit_intercept, A), free


@njit(cache=True)
def _forward_solve(L, B):
    """``B <- L^-1 B`` in place, ``L`` lower triangular (its upper part is ignored)."""
    p = L.shape[0]
    for col in range(B.shape[1]):
        for r in range(p):
            v = B[r, col]
            for k in range(r):
                v -= L[r, k] * B[k, col]
            B[r, col] = v / L[r, r]


@njit(cache=True)
def _top_generalised_eigenvalue(M, H, mu, inv_tau, fit_intercept, A):
    """Largest eigenvalue of ``(H + diag(mu + inv_tau, ..., inv_tau))^-1 M`` (``M`` symmetric, overwritten).

    With the Cholesky factor ``L`` of the positive definite left matrix, the
    eigenvalue of the symmetric ``L^-1 M L^-T``.  The factorisation and the
    triangular solves are written out: for the small ``p`` of these solvers,
    LAPACK's fixed cost per call exceeds the whole computation.
    """
    p = M.shape[0]
    d = p - 1 if fit_intercept else p
    trace = 0.0
    for a in range(p):
        trace += H[a, a]
    for a in range(p):
        for c in range(p):
            A[a, c] = H[a, c]
    for a in range(d):
        A[a, a] += mu + inv_tau
    if fit_intercept:
        A[d, d] += inv_tau + 1e-12 * max(1.0, trace)
    # Cholesky A = L L^T in place (lower triangle)
    for j in range(p):
        v = A[j, j]
        for k in range(j):
            v -= A[j, k] * A[j, k]
        if not v > 0.0:
            raise np.linalg.LinAlgError("Matrix is not positive definite.")
        ljj = np.sqrt(v)
        A[j, j] = ljj
        for r in range(j + 1, p):
            v = A[r, j]
            for k in range(j):
                v -= A[r, k] * A[j, k]
            A[r, j] = v / ljj
    _forward_solve(A, M)  # L^-1 M
    for a in range(p):  # (L^-1 M)^T = M L^-T
        for c in range(a + 1, p):
            M[a, c], M[c, a] = M[c, a], M[a, c]
    _forward_solve(A, M)  # L^-1 M L^-T
    for a in range(p):
        for c in range(a + 1, p):
            v = 0.5 * (M[a, c] + M[c, a])
            M[a, c] = v
            M[c, a] = v
    return max(np.linalg.eigvalsh(M)[p - 1], 0.0)


@njit(cache=True)
def _single_steps(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias, unit_s,
                  fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b):
    """``steps`` variance-reduced proximal steps of one sample each (SOREL's inner loop).

    Step: draw ``i``, ``delta = mult_i (s_i l'(t_i(w)) - gref_i)``, then
    ``w <- prox((w + cst - lr delta x_i))`` with the closed form of the
    penalty and anchor terms (``cst`` holds ``-lr gbar + lr w_k / tau``).
    The loop is bound by the latency of one step's chain of dependent
    operations (dot product, derivative, update), so the variants are
    written out: ``unit_s`` (regression, ``s = 1``: ``s_i f`` is ``f``
    exactly) saves two multiplications on that chain.  The draws are those
    of :func:`skrank.solvers.stochastic.sampling.draw_index`.
    """
    n, d = X.shape
    b0 = b[0]
    thr = lr * l1
    for _ in range(steps):
        # draw_index written out: as a call, inlined or not, it made this loop 6-19 % slower (d = 5)
        r = xorshift_uniform(rng) * n
        i = int(r)
        if i >= n:
            i = n - 1
        if use_alias and (r - i) >= prob[i]:
            i = packed[i] >> 32
        f = b0
        for a in range(d):
            f += X[i, a] * w[a]
        if unit_s:
            delta = mult[i] * (loss_derivative(code, f + c[i], param) - gref[i])
        else:
            delta = mult[i] * (s[i] * loss_derivative(code, s[i] * f + c[i], param) - gref[i])
        ld = lr * delta
        if l1 > 0.0:
            for a in range(d):
                w[a] = soft_scalar(w[a] + cst[a] - ld * X[i, a], thr) * inv_denom
        else:
            for a in range(d):
                w[a] = (w[a] + cst[a] - ld * X[i, a]) * inv_denom
        if fit_intercept:
            b0 = (b0 + cst_b - ld) * inv_denom_b
    b[0] = b0


@njit(cache=True, inline="always")
def _l2_draw(x, fn, nm1, prob, packed, use_alias):
    """A draw of :func:`_single_steps_l2` (its first two) from the state ``x``: the new state, the index."""
    x ^= x >> U12
    x ^= x << U25
    x ^= x >> U27
    r = float((x * MULT) >> U11) * INV53 * fn
    i = min(np.uint64(r), nm1)
    if use_alias:
        i = (np.uint64(packed[i]) >> (np.uint64((r - float(i)) >= prob[i]) << U5)) & LOW32
    return x, i


@njit(cache=True, inline="always")
def _l2_dots(X, i, j, w, icst):
    """``(x_j . w, x_j . icst, x_j . x_i)``, the first lookahead of :func:`_single_steps_l2`."""
    dot_w = 0.0
    dot_c = 0.0
    dot_x = 0.0
    for a in range(X.shape[1]):
        xj = X[j, a]
        dot_w += xj * w[a]
        dot_c += xj * icst[a]
        dot_x += xj * X[i, a]
    return dot_w, dot_c, dot_x


@njit(cache=True, fastmath={"contract"})
def _single_steps_l2(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias,
                     fit_intercept, lr, cst, cst_b, inv_denom, inv_denom_b, icst, smooth, pw, tot):
    """:func:`_single_steps` without l1 (a lookahead of two samples), the same draws.

    The step ``w' = inv_denom (w + cst) - inv_denom ld x_i`` is linear in
    ``ld``, so the argument of the sample two steps ahead, ``k``, splits into
    products that do not depend on the current ``ld``: with
    ``base = inv_denom w + inv_denom cst``, ``x_k . w' = x_k . base - inv_denom
    ld x_k . x_i``, and one step later ``x_k . w'' = inv_denom x_k . w' +
    x_k . (inv_denom cst) - inv_denom ld' x_k . x_j``.  The chain of dependent
    operations from one step's ``ld`` to the next is then one multiply-add,
    the loss derivative and two operations; the dot products of the
    coordinates run alongside (the loop is bound by the number of
    operations, not their latency).  The same iterates up to rounding.

    Draws: the uniform number and the alias test are those of
    :func:`skrank.solvers.stochastic.sampling.draw_index`, with the random state in a
    register and the choice between ``i`` and ``alias[i]`` made by a shift
    of the packed entry ``packed[i] = i | alias[i] << 32``, not by an
    unpredictable branch.  With the alias table, ``mult`` is not read:
    ``mult_i = tot / smooth_i`` (0 where ``pw_i = 0``) is computed for the
    drawn samples only.  ``icst`` is a length-``d`` scratch.
    """
    n, d = X.shape
    for a in range(d):
        icst[a] = inv_denom * cst[a]
    cb = inv_denom_b * cst_b if fit_intercept else 0.0
    ib = inv_denom_b if fit_intercept else 0.0
    b0 = b[0]
    x = rng[0]
    nm1 = np.uint64(n - 1)
    fn = float(n)
    lr_tot = lr * tot
    # draws written out in the loop: a helper returning (state, index), inlined or not, cost 40-55 % (d = 5)
    # the first two samples: i (its argument directly) and j
    x, i = _l2_draw(x, fn, nm1, prob, packed, use_alias)
    f = b0
    for a in range(d):
        f += X[i, a] * w[a]
    j = i
    if steps > 1:
        x, j = _l2_draw(x, fn, nm1, prob, packed, use_alias)
    dot_w, dot_c, dot_x = _l2_dots(X, i, j, w, icst)
    # the next sample's argument is f_next - ld * g_next
    f_next = inv_denom * dot_w + dot_c + (inv_denom_b * b0 + cb if fit_intercept else b0)
    g_next = inv_denom * dot_x + ib
    for t in range(steps):
        k = j  # the sample two steps ahead (a dummy at the end: no draw)
        if t + 2 < steps:
            x ^= x >> U12
            x ^= x << U25
            x ^= x >> U27
            r = float((x * MULT) >> U11) * INV53 * fn
            k = min(np.uint64(r), nm1)
            if use_alias:
                k = (np.uint64(packed[k]) >> (np.uint64((r - float(k)) >= prob[k]) << U5)) & LOW32
        if use_alias:
            lm = lr_tot / smooth[i]
            lm = lm if pw[i] > 0.0 else 0.0
        else:
            lm = lr * mult[i]
        si = s[i]
        ld = lm * (si * loss_derivative(code, si * f + c[i], param) - gref[i])
        ild = inv_denom * ld
        dot_w = 0.0  # x_k . base
        dot_i = 0.0  # x_k . x_i
        dot_x = 0.0  # x_k . x_j
        dot_c = 0.0  # x_k . icst
        for a in range(d):
            base = inv_denom * w[a] + icst[a]
            xk = X[k, a]
            xi = X[i, a]
            dot_w += xk * base
            dot_i += xk * xi
            dot_x += xk * X[j, a]
            dot_c += xk * icst[a]
            w[a] = base - ild * xi
        if fit_intercept:
            b0 = inv_denom_b * b0 + cb - inv_denom_b * ld
        f = f_next - ld * g_next
        f_next = (inv_denom * (dot_w - ild * dot_i) + dot_c
                  + (inv_denom_b * b0 + cb if fit_intercept else b0))
        g_next = inv_denom * dot_x + ib
        i = j
        j = k
    b[0] = b0
    rng[0] = x


@njit(cache=True)
def _extrapolated_losses(losses, losses_prev, k, v):
    """``v = (1 + theta_k) l(w_k) - theta_k l(w_{k-1})``, ``theta_k = k / (k + 1)``; returns ``max |v_i|``."""
    theta = k / (k + 1.0)
    vmax = 0.0
    for i in range(losses.shape[0]):
        vi = (1.0 + theta) * losses[i] - theta * losses_prev[i]
        v[i] = vi
        vmax = max(vmax, abs(vi))
    return vmax


@njit(cache=True)
def _dual_step_size(state, k, auto_dual, C, mu, growth, sigma_max, vmax):
    """The dual step ``eta_k``: the paper's schedule or geometric growth, under the face cap ``state[2]``."""
    if not auto_dual:
        eta = min(C * mu * (k + 1.0), state[2])  # the paper's schedule, capped
    elif k == 0:
        eta = C * mu
    else:
        eta = min(growth * state[1], state[2])
    # beyond this the projection is a hard re-ranking anyway, and lam + eta v
    # would lose lam's digits to cancellation (vmax: the largest |v_i|)
    if vmax > 0.0:
        eta = min(eta, 1e4 * sigma_max / vmax)
    return eta


@njit(cache=True)
def _dual_gap(obj, w, l1, mu, lam_l):
    """Dual optimality of the new weights at ``w_k``, relative to ``F(w_k) = obj``.

    The gap ``max_{lam' in Pi_sigma} lam'^T l(w_k) - lam^T l(w_k) = R_sigma(l(w_k)) - lam_l >= 0``.
    Unlike ``||lam_{k+1} - lam_k||``, it does not vanish when the dual step
    is small: it is zero only when ``lam`` ranks ``l(w_k)``.
    """
    risk = obj  # F(w_k) minus the penalty
    for a in range(w.shape[0]):
        risk -= l1 * abs(w[a]) + 0.5 * mu * w[a] * w[a]
    return max(risk - lam_l, 0.0) / max(abs(obj), 1e-300)


@njit(cache=True)
def _reference_gradient(X, s, t, code, param, lam, smooth, gref, gbar, weights):
    """The reference gradient at ``w_k``: ``gref_i = s_i l'(t_i)``, ``gbar = sum lam_i gref_i x_i``.

    Also the importance weights ``lam_i L_i`` in ``weights``.  Returns
    ``(gbar_b, tot)``: the intercept's part of ``gbar`` and the weights' sum.
    """
    n, d = X.shape
    for a in range(d):
        gbar[a] = 0.0
    gbar_b = 0.0
    tot = 0.0
    for i in range(n):
        g = s[i] * loss_derivative(code, t[i], param)
        gref[i] = g
        li = lam[i]
        lg = li * g
        # no branch on lg == 0 (unpredictable, e.g. half the weights of a
        # superquantile): adding 0 * x leaves the sums unchanged
        for a in range(d):
            gbar[a] += lg * X[i, a]
        gbar_b += lg
        pi = max(li, 0.0) * smooth[i]
        weights[i] = pi
        tot += pi
    return gbar_b, tot


@njit(cache=True)
def _gradient_norm(gbar, gbar_b, w, mu, fit_intercept):
    """``||(gbar + mu w, gbar_b)||``, the intercept's entry only with one."""
    gn = 0.0
    for a in range(w.shape[0]):
        gn += (gbar[a] + mu * w[a]) ** 2
    if fit_intercept:
        gn += gbar_b * gbar_b
    return np.sqrt(gn)


@njit(cache=True)
def _sampling_tables(importance, single_l2, lam, smooth, weights, tot, prob, mult, packed, small, large):
    """The alias table of the weights ``lam_i L_i`` and the multipliers ``mult``; returns ``use_alias``.

    Without importance sampling (or all weights zero) ``mult_i = n lam_i``.
    With it, ``mult_i = tot / L_i``, except for :func:`_single_steps_l2`
    (``single_l2``), which computes them for the drawn samples.
    """
    n = lam.shape[0]
    use_alias = importance and tot > 0.0
    if use_alias and single_l2:
        # the weights scaled to mean one
        scale = n / tot
        for i in range(n):
            prob[i] = weights[i] * scale
    elif use_alias:
        for i in range(n):
            # n p_i / tot, rounded unlike p_i (n / tot) above: each loop keeps the
            # table, hence the draws, it had when the two had builders of their own
            prob[i] = weights[i] * n / tot
            # (a zero weight may come from a zero smoothness: no division then)
            mult[i] = tot / smooth[i] if weights[i] > 0.0 else 0.0
    else:
        for i in range(n):
            mult[i] = n * lam[i]
    if use_alias:
        build_alias(prob, packed, small, large)
    return use_alias


@njit(cache=True)
def _minibatch_steps(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias, batch,
                     fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b, idx, direction):
    """:func:`_single_steps` with mini-batches of ``batch`` samples (``idx``, ``direction``: scratch)."""
    n, d = X.shape
    thr = lr * l1
    inv_b = 1.0 / batch
    for _ in range(steps):
        for m in range(batch):
            idx[m] = draw_index(rng, n, prob, packed, use_alias)
        for a in range(d):
            direction[a] = 0.0
        db = vr_batch_direction(X, w, b[0], idx, 0, batch, s, c, code, param, gref, mult, inv_b, direction,
                                0.0)
        for a in range(d):
            z = w[a] + cst[a] - lr * direction[a]
            w[a] = (soft_scalar(z, thr) if l1 > 0.0 else z) * inv_denom
        if fit_intercept:
            b[0] = (b[0] + cst_b - lr * db) * inv_denom_b


@njit(cache=True)
def _primal_step(X, s, c, code, param, w, b, gref, gbar, gbar_b, mult, prob, packed, rng, use_alias, tot,
                 smooth, weights, batch, unit_s, fit_intercept, l1, lr, mu, inv_tau, cst, idx, y_work):
    """The primal step on ``P_k``: an epoch of variance-reduced proximal steps anchored at ``w_k``."""
    n, d = X.shape
    steps = (n + batch - 1) // batch
    inv_denom = 1.0 / (1.0 + lr * mu + lr * inv_tau)
    for a in range(d):
        cst[a] = -lr * gbar[a] + lr * inv_tau * w[a]
    cst_b = -lr * gbar_b + lr * inv_tau * b[0]
    inv_denom_b = 1.0 / (1.0 + lr * inv_tau)
    if batch == 1 and l1 == 0.0:
        _single_steps_l2(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias,
                         fit_intercept, lr, cst, cst_b, inv_denom, inv_denom_b, y_work, smooth,
                         weights, tot if use_alias else 0.0)
    elif batch == 1:
        _single_steps(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias,
                      unit_s, fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b)
    else:
        _minibatch_steps(X, s, c, code, param, w, b, gref, mult, prob, packed, rng, steps, use_alias, batch,
                         fit_intercept, l1, lr, cst, cst_b, inv_denom, inv_denom_b, idx, y_work)


@njit(cache=True)
def _losses_at(X, s, c, code, param, w, b, t, losses, losses_prev):
    """``t = s (X w + b) + c`` and ``losses = l(t)``; the old losses move to ``losses_prev``."""
    n, d = X.shape
    for i in range(n):
        losses_prev[i] = losses[i]
        f = b[0]
        for a in range(d):
            f += X[i, a] * w[a]
        tt = s[i] * f + c[i]
        t[i] = tt
        losses[i] = loss_value(code, tt, param)


@njit(cache=True)
def _penalised_risk(sigma, l_sorted, w, l1, mu):
    """``sum_j sigma_j l_(j) + l1 ||w||_1 + mu ||w||^2 / 2`` from the sorted losses ``l_sorted``."""
    obj = 0.0
    for j in range(sigma.shape[0]):
        obj += sigma[j] * l_sorted[j]
    pen = 0.0
    for a in range(w.shape[0]):
        pen += l1 * abs(w[a]) + 0.5 * mu * w[a] * w[a]
    return obj + pen


@njit(cache=True)
def _safeguard_dual_step(state, obj, eta, dual_turn, C, mu, k, growth):
    """After an epoch whose objective ``obj`` went up: halve the dual step, maybe lower the face cap.

    Otherwise the cap recovers slowly (``state[7]`` counts its shrinks).
    """
    if obj > state[4] + 1e-13 * abs(obj):
        # the dual step overshot (the weights jumped across a face): halve it instead of growing it
        state[1] = max(eta / 2.0, min(C * mu * (k + 2.0), state[2])) / growth
        # and lower the face cap when the step at the cap overshot: the dual
        # move reversed the previous one.  (A rise without a reversal is the
        # primal drifting under stale weights: shrinking then would freeze
        # the dual for good.)
        if eta >= 0.999 * state[2] and dual_turn < 0.0:
            state[7] += 1.0
            state[2] *= _CAP_SHRINK
    elif state[7] > 0.0:
        state[7] = max(state[7] - _CAP_RECOVER, 0.0)


@njit(cache=True)
def sorel_epochs(
    X, s, c, sigma, smooth, code, param, w, b, t, losses, losses_prev, lam, perm_z, perm_l,
    ipar, fpar, state, rng, hist, crits, etas, H, work_n, work_n2, gref, mult,
    prob, packed, small, large, idx, gbar, cst, y_work, M, A, dlam, z_sorted, pav_wy, pav_end, rows,
):
    """Run SOREL epochs ``state[0] .. `` until ``ipar`` says stop; returns the epochs run.

    ``ipar``: epochs to run in this call, batch size, fit_intercept, importance
    sampling, automatic dual step, H refresh period, all ``s_i = 1``.
    ``fpar``: lr, l1, l2 (mu), tau_scale, tol, dual scale C, growth, face
    safety factor.
    ``state``: epoch counter, eta, cap, grad0, last objective, status
    (0 running, 1 converged, 2 diverged), free samples of the last face,
    cap shrink count.
    Per epoch ``k`` the histories get ``hist[k + 1]`` (objective),
    ``crits[k]`` (criterion), ``etas[k]`` (dual step).

    Both sorts work on gathered copies (:func:`skrank.kernels.sorting.sort_keyed`,
    scratch allocated once per call); the projection is fused with lam's
    update (:func:`_project_sorted`).  Importance sampling draws from the
    packed alias table (:func:`skrank.solvers.stochastic.sampling.build_alias`).
    """
    n, d = X.shape
    n_ep, batch, fit_intercept, importance, auto_dual, h_period, unit_s = (
        ipar[0], ipar[1], ipar[2] != 0, ipar[3] != 0, ipar[4] != 0, ipar[5], ipar[6] != 0)
    lr, l1, mu, tau_scale, tol, C, growth, safety = (
        fpar[0], fpar[1], fpar[2], fpar[3], fpar[4], fpar[5], fpar[6], fpar[7])
    pk, pk2, kbuf, pbuf, counts, rhist = keyed_scratch(n)
    l_sorted = np.empty(n)  # the losses in sorted order (the objective)
    multi = np.empty(n, dtype=np.int64)  # the multi-sample PAV blocks: (start, end) pairs
    msum = np.empty(M.shape[0])
    ran = 0
    vmax = _extrapolated_losses(losses, losses_prev, int(state[0]), work_n)  # v in work_n
    for _ in range(n_ep):
        k = int(state[0])
        # ---- dual step: z = lam + eta v gathered in the previous order of z, sorted,
        # projected onto the permutahedron; dual_turn < 0: this dual move reverses
        # the previous one, the sign of an overshoot
        eta = _dual_step_size(state, k, auto_dual, C, mu, growth, sigma[n - 1], vmax)
        state[1] = eta
        etas[k] = eta
        descents, far = _gather_z(lam, work_n, eta, perm_z, z_sorted)
        sort_keyed(z_sorted, perm_z, descents, far, pk, pk2, kbuf, pbuf, counts, rhist)
        n_multi, dual_turn, lam_l = _project_sorted(z_sorted, sigma, perm_z, lam, dlam, losses,
                                                    pav_wy, pav_end, multi)
        dual_gap = _dual_gap(state[4], w, l1, mu, lam_l)
        # ---- reference gradient at w_k with the new weights, sampling tables, primal step
        gbar_b, tot = _reference_gradient(X, s, t, code, param, lam, smooth, gref, gbar, work_n2)
        gn = _gradient_norm(gbar, gbar_b, w, mu, fit_intercept)
        if k == 0 or state[3] <= 0.0:
            state[3] = max(gn, 1e-300)
        use_alias = _sampling_tables(importance, batch == 1 and l1 == 0.0, lam, smooth, work_n2, tot, prob,
                                     mult, packed, small, large)
        _primal_step(X, s, c, code, param, w, b, gref, gbar, gbar_b, mult, prob, packed, rng, use_alias, tot,
                     smooth, work_n2, batch, unit_s, fit_intercept, l1, lr, mu, mu * (k + 1.0) / tau_scale,
                     cst, idx, y_work)
        # ---- losses at w_{k+1}: the objective and the next epoch's v (theta_{k+1})
        _losses_at(X, s, c, code, param, w, b, t, losses, losses_prev)
        vmax = _extrapolated_losses(losses, losses_prev, k + 1, work_n)
        descents, far = gather_keys(losses, perm_l, l_sorted)
        sort_keyed(l_sorted, perm_l, descents, far, pk, pk2, kbuf, pbuf, counts, rhist)
        obj = _penalised_risk(sigma, l_sorted, w, l1, mu)
        hist[k + 1] = obj
        state[0] = k + 1
        ran += 1
        if not np.isfinite(obj):
            crits[k] = np.inf
            state[5] = 2.0
            break
        rel = abs(state[4] - obj) / max(abs(obj), 1e-300)
        if auto_dual:
            _safeguard_dual_step(state, obj, eta, dual_turn, C, mu, k, growth)
        elif state[7] > 0.0:
            state[7] = max(state[7] - _CAP_RECOVER, 0.0)
        state[4] = obj
        crits[k] = max(rel, max(gn / state[3], dual_gap))
        if crits[k] <= tol:
            state[5] = 1.0
            break
        # ---- cap of the next dual step: the dual smoothness on the current face
        if h_period > 0 and ((k & (k + 1)) == 0 or (k + 1) % h_period == 0):
            _primal_curvature(X, t, lam, code, param, fit_intercept, H, rows)
        lf, free = _face_smoothness(X, s, t, code, param, perm_z, multi, n_multi, H, mu,
                                    mu * (k + 2.0) / tau_scale, fit_intercept, rows, M, A, msum)
        state[6] = free
        state[2] = safety * _CAP_SHRINK ** state[7] / lf if lf > 0.0 else np.inf
    return ran
