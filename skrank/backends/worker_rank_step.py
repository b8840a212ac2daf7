"""What a fit asks of a rank step whose keys are Dask arrays on the workers, beyond the protocol.

The threshold form of the capped simplex
(:class:`skrank.datafits.rank_step.ThresholdRankStep`) and the sample sort
(:class:`skrank.backends.dask_rank.DaskSortedRankStep`) share it; it loads
no Dask until a fit on Dask keys asks.
"""


class WorkerRankStep:
    """What a fit asks of a rank step of Dask keys beyond ``project``, ``risk_value``, ``block_terms``."""

    def top(self, n):
        """The largest rank weight per unit of mass, of unit masses: the scale of the first smoothing."""
        return float(self.risk.weights_slice(n, n - 1, n)[0])

    def first_center(self, losses, warm, n):
        """The first centre and :meth:`top`: cold, the mean weight per unit of mass (one number); warm,
        the projection of ``losses()`` at a tiny smoothing (within ``1e-9`` of their rank weights)."""
        top = self.top(n)
        if not warm:
            return 1.0 / n, top
        import dask

        losses = losses()
        low, high = (float(v) for v in dask.compute(losses.min(), losses.max()))
        mu = 1e-9 * max(high - low, abs(high), 1e-300) / max(top, 1e-300)
        return self.project(losses, mu)[0], top

    def restarted_from(self, keys):
        """The step itself: it keeps no order to start from."""
        return self
