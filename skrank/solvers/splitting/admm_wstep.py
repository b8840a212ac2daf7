"""The w-step of the rank ADMM, factorised once per fit.

Xiao, Ge, Jiang and Yan, "A Unified Framework for Rank-based Loss
Minimization" (NeurIPS 2023), Algorithm 1: a penalised least-squares
problem, solved in closed form for l2 and by FISTA or the smoothed variant
for l1.  The elimination of the intercept and the factorisation are
described in the user guide, :ref:`methods-admm`.
"""

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp

from ..._jit import njit
from ...penalties import soft_threshold


def _eigh(A):
    """Eigenpairs of a symmetric matrix (LAPACK's divide and conquer)."""
    return scipy.linalg.eigh(A, driver="evd", check_finite=False)


@njit(cache=True)
def _cd_gram(G, r, rho, l1, l2, w, Gw, tol, max_sweeps):
    # Cyclic coordinate descent on  rho/2 w'Gw - r'w + l2/2 ||w||^2 + l1 ||w||_1,
    # keeping Gw = G @ w up to date.  Stops when the largest coordinate change
    # times its curvature (a bound on the subgradient residual) is below tol.
    d = w.shape[0]
    for sweep in range(1, max_sweeps + 1):
        worst = 0.0
        for j in range(d):
            h = rho * G[j, j] + l2
            if h <= 0.0:
                continue
            wj = w[j]
            u = r[j] - rho * (Gw[j] - G[j, j] * wj)
            if u > l1:
                new = (u - l1) / h
            elif u < -l1:
                new = (u + l1) / h
            else:
                new = 0.0
            delta = new - wj
            if delta != 0.0:
                w[j] = new
                for i in range(d):
                    Gw[i] += G[i, j] * delta
                change = abs(delta) * h
                if change > worst:
                    worst = change
        if worst <= tol:
            return sweep
    return max_sweeps


class WStep:
    """Solver of the ADMM w-subproblem for one data matrix and penalty.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n, d)
        Data (float64).
    penalty : skrank.penalties.Penalty
        The penalty ``l1 ||w||_1 + l2/2 ||w||^2``.
    fit_intercept : bool
        Whether ``b`` is a free (unpenalised) variable.
    l1_solver : {"fista", "smoothed"}, default="fista"
        Solver of the subproblem when the penalty has an l1 part.
    """

    def __init__(self, X, penalty, fit_intercept, l1_solver="fista"):
        self.X = X
        self.n, self.d = X.shape
        self.penalty = penalty
        self.fit_intercept = bool(fit_intercept)
        self.l1_solver = l1_solver
        self.sparse = sp.issparse(X)
        if self.fit_intercept:
            self.mu = np.asarray(X.mean(axis=0)).ravel()
        else:
            self.mu = np.zeros(self.d)
        self._factorise()

    # ---------------------------------------------------------------- products with Xc
    def matvec(self, w):
        """``Xc @ w`` (centred when an intercept is fitted)."""
        out = np.asarray(self.X @ w).ravel()
        if self.fit_intercept:
            out = out - self.mu @ w
        return out

    def rmatvec(self, u):
        """``Xc.T @ u``."""
        out = np.asarray(self.X.T @ u).ravel()
        if self.fit_intercept:
            out = out - self.mu * u.sum()
        return out

    def _factorise(self):
        n, d = self.n, self.d
        X = self.X
        if d <= n:
            # Gram matrix of the centred data, without densifying a sparse X.
            G = X.T @ X
            G = G.toarray() if sp.issparse(G) else np.asarray(G)
            if self.fit_intercept:
                G = G - n * np.outer(self.mu, self.mu)
            G = 0.5 * (G + G.T)
            s, V = _eigh(G)
            self.gram = G
        else:
            Xd = X.toarray() if self.sparse else X
            Xc = Xd - self.mu if self.fit_intercept else Xd
            K = Xc @ Xc.T
            s, U = _eigh(0.5 * (K + K.T))
            keep = s > max(s.max(), 0.0) * 1e-12 * n
            s, U = s[keep], U[:, keep]
            V = (Xc.T @ U) / np.sqrt(s)
            self.gram = None
            self._U = U
        s = np.maximum(s, 0.0)
        self.s = s
        self.V = V
        self.s_max = float(s.max()) if s.size else 0.0
        # Eigenvalues below this are treated as exact zeros (pseudo-inverse when l2 = 0).
        self._s_floor = self.s_max * 1e-12 * max(n, d)
        self.full_basis = d <= n
        self._basis = None

    # ---------------------------------------------------------------- l2 in prediction space
    #: Largest ``n * rank`` for which :meth:`prediction_basis` is built (float64 entries).
    max_basis_size = 64_000_000

    def fast_l2_available(self):
        """Whether the l2 step can run in prediction space (:meth:`fast_l2`)."""
        return self.penalty.l1 == 0.0 and self.n * self.s.size <= self.max_basis_size

    def prediction_basis(self):
        """``(B, s)`` with ``Xc w`` for the l2 step expressed through ``B`` (n x r).

        ``d <= n``: ``B = Xc V`` (the eigenvectors ``V`` of the Gram matrix,
        never divided by the singular values, so no precision is lost on
        small ones); ``n < d``: ``B = U``, the eigenvectors of the kernel
        matrix ``Xc Xc^T`` (the thin SVD's left factor).  Only directions
        with a positive eigenvalue are kept.  Built once per fit.
        """
        if self._basis is None:
            keep = self.s > self._s_floor
            s = np.ascontiguousarray(self.s[keep])
            if self.full_basis:
                V = np.ascontiguousarray(self.V[:, keep])
                B = self.matvec_many(V)
                self._basis = (np.ascontiguousarray(B), s, V)
            else:
                self._basis = (np.ascontiguousarray(self._U[:, keep]), s, None)
        return self._basis

    def matvec_many(self, W):
        """``Xc @ W`` for a matrix ``W`` (d x k)."""
        out = np.asarray(self.X @ W)
        if self.fit_intercept:
            out = out - self.mu @ W
        return out

    def fast_l2(self, v, rho):
        """The exact l2 step in prediction space, in ``O(n r)``.

        Returns ``(f, c, penalty_value)``: the new prediction ``f = X w + b``,
        the coefficients ``c`` from which :meth:`fast_coef` rebuilds ``w``,
        and ``l2/2 ||w||^2``.  Same solution as :meth:`solve` with an l2
        penalty and no linear term:
        ``w = rho (rho Xc^T Xc + l2 I)^+ Xc^T vc`` and ``b = mean(v) - mu.w``,
        so ``X w + b = Xc w + mean(v)``.
        """
        B, s, _ = self.prediction_basis()
        l2 = self.penalty.l2
        vbar = float(v.mean()) if self.fit_intercept else 0.0
        vc = v - vbar if self.fit_intercept else v
        proj = B.T @ vc
        g = rho / (rho * s + l2)
        c = g * proj
        if self.full_basis:
            # w = V c, Xc w = B c, ||w|| = ||c||
            f = B @ c
            wnorm2 = float(c @ c)
        else:
            # w = Xc^T U (c), Xc w = U (s c), ||w||^2 = c' diag(s) c
            f = B @ (s * c)
            wnorm2 = float(c @ (s * c))
        if self.fit_intercept:
            f += vbar
        return f, c, 0.5 * l2 * wnorm2

    def fast_coef(self, c):
        """``w`` from the coefficients returned by :meth:`fast_l2`."""
        B, _, V = self.prediction_basis()
        if self.full_basis:
            return V @ c
        return self.rmatvec(B @ c)

    def gram_matvec(self, w):
        """``Xc.T Xc w``."""
        if self.gram is not None:
            return self.gram @ w
        return self.rmatvec(self.matvec(w))

    # ---------------------------------------------------------------- the step
    def intercept_for(self, w, v, rho, q_b=0.0):
        """Optimal intercept for fixed ``w`` (0 without intercept)."""
        if not self.fit_intercept:
            return 0.0
        return float(v.mean() - self.mu @ w + q_b / (rho * self.n))

    def solve(self, v, rho, w0, q=None, tol=1e-10, max_iter=10000):
        """Solve the w-subproblem.

        Parameters
        ----------
        v : ndarray of shape (n,)
            Target of the least-squares term.
        rho : float
            ADMM penalty.
        w0 : ndarray of shape (d,)
            Warm start (used by the iterative l1 solvers).
        q : ndarray of shape (d + 1,), default=None
            Linear term ``(q_w, q_b)`` subtracted from the objective.
        tol : float, default=1e-10
            For the iterative solvers: bound on the norm of the proximal
            gradient mapping of the subproblem.
        max_iter : int, default=10000
            Iteration cap of the iterative solvers.

        Returns
        -------
        w : ndarray of shape (d,)
        b : float
        n_inner : int
            Inner iterations (0 for the closed form).
        """
        vc = v - v.mean() if self.fit_intercept else v
        r = rho * self.rmatvec(vc)
        q_b = 0.0
        if q is not None:
            q_b = float(q[-1]) if self.fit_intercept else 0.0
            r = r + q[:-1] - q_b * self.mu
        pen = self.penalty
        if pen.l1 == 0.0:
            w = self._closed_form(r, rho, pen.l2)
            n_inner = 0
        elif self.l1_solver == "smoothed":
            w, n_inner = self._smoothed(r, rho, w0, tol, max_iter)
        elif self.l1_solver == "cd":
            w, n_inner = self._cd(r, rho, w0, tol, max_iter)
        else:
            w, n_inner = self._fista(r, rho, w0, tol, max_iter)
        return w, self.intercept_for(w, v, rho, q_b), n_inner

    def _closed_form(self, r, rho, l2):
        # (rho Xc^T Xc + l2 I) w = r, through the eigenpairs (our choice; the
        # paper's w-step for l2 is a strongly convex quadratic).
        V, s = self.V, self.s
        denom = rho * s + l2
        Vr = V.T @ r
        with np.errstate(divide="ignore"):
            inv = np.where(s > self._s_floor, 1.0 / denom, 1.0 / l2 if l2 > 0 else 0.0)
        w = V @ (inv * Vr)
        if not self.full_basis and l2 > 0:
            # Component of r outside the row space of Xc (only from a linear term q).
            w += (r - V @ Vr) / l2
        return w

    def _fista(self, r, rho, w0, tol, max_iter):
        # min_w rho/2 w^T G w - r.w + l2/2 ||w||^2 + l1 ||w||_1 by FISTA with
        # gradient-based adaptive restart (O'Donoghue & Candes).
        l1, l2 = self.penalty.l1, self.penalty.l2
        L = rho * self.s_max + l2
        if L <= 0.0:
            return soft_threshold(r, np.inf), 0
        w = w0.copy()
        y = w.copy()
        t = 1.0
        for it in range(1, max_iter + 1):
            grad = rho * self.gram_matvec(y) - r + l2 * y
            w_new = soft_threshold(y - grad / L, l1 / L)
            step = w_new - y
            # L ||w_new - y|| bounds dist(0, subdifferential at w_new) up to a factor 2.
            if L * np.linalg.norm(step) <= tol:
                return w_new, it
            if step @ (w_new - w) > 0.0:  # restart: momentum points uphill
                t = 1.0
                y = w_new
            else:
                t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
                y = w_new + ((t - 1.0) / t_new) * (w_new - w)
                t = t_new
            w = w_new
        return w, max_iter

    def _cd(self, r, rho, w0, tol, max_iter):
        if self.gram is None:
            self.gram = np.ascontiguousarray(self._dense_gram())
        w = np.array(w0, dtype=np.float64)
        Gw = self.gram @ w
        sweeps = _cd_gram(
            self.gram, r, rho, self.penalty.l1, self.penalty.l2, w, Gw, tol, max_iter
        )
        return w, int(sweeps)

    def _dense_gram(self):
        Xd = self.X.toarray() if self.sparse else self.X
        Xc = Xd - self.mu if self.fit_intercept else Xd
        return Xc.T @ Xc

    def _smoothed(self, r, rho, w0, tol, max_iter):
        # sADMM (Xiao et al. 2023, section 4): l1 ||w||_1 replaced by its Moreau envelope
        # M_gamma, whose gradient is (w - prox_{gamma l1}(w)) / gamma; the returned
        # point is prox_{gamma l1}(w) (the paper's w-tilde).
        l1, l2 = self.penalty.l1, self.penalty.l2
        gamma = self.gamma

        def fun(w):
            Gw = self.gram_matvec(w)
            p = soft_threshold(w, gamma * l1)
            env = l1 * np.abs(p).sum() + ((w - p) @ (w - p)) / (2.0 * gamma)
            f = 0.5 * rho * (w @ Gw) - r @ w + 0.5 * l2 * (w @ w) + env
            g = rho * Gw - r + l2 * w + (w - p) / gamma
            return f, g

        res = scipy.optimize.minimize(
            fun,
            w0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": tol, "ftol": 0.0},
        )
        return soft_threshold(res.x, gamma * l1), int(res.nit)

    #: Moreau parameter of the smoothed variant; the ADMM loop updates it.
    gamma = 1e-5
