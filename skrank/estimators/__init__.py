"""scikit-learn estimators of skrank."""

from .spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor

__all__ = ["SpectralRiskClassifier", "SpectralRiskRegressor"]
