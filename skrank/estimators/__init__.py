"""scikit-learn estimators of skrank."""

from .rank_admm import RankADMMClassifier, RankADMMRegressor
from .spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor

__all__ = [
    "RankADMMClassifier",
    "RankADMMRegressor",
    "SpectralRiskClassifier",
    "SpectralRiskRegressor",
]
