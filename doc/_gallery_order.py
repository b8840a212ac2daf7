"""The order of the examples in the gallery: from the objects to the fits to the tuning."""

ORDER = [
    "plot_risk_weights.py",
    "plot_partial_auc_roc.py",
    "plot_average_precision_pr.py",
    "plot_loss_distribution.py",
    "plot_grid_search_q.py",
    "plot_solver_convergence.py",
]


class ExampleOrder:
    """Sort key for ``sphinx_gallery_conf["within_subsection_order"]``: ``ORDER``, then by name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        return (ORDER.index(filename) if filename in ORDER else len(ORDER), filename)

    def __repr__(self):
        return f"<{type(self).__name__}>"
