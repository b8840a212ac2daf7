"""Full-batch solvers: L-BFGS, Newton, the interior-point method and the closed form."""
