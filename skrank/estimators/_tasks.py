"""The classifiers' and the regressors' parts of the fit template: targets, classes, prediction."""

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import column_or_1d

from ..backends import arrays
from ..backends.array_api_design import to_numpy
from ..backends.dask_design import is_dask_array
from ..metrics import _check_label_types, _dense
from ._params import samples_method_doc
from ._streams import StreamingMethod


def _labels_of(y):
    """The distinct labels of ``y``, sorted; of a Dask ``y`` by a reduction on its chunks."""
    if not is_dask_array(y):
        return np.unique(y)
    import dask.array as da

    return np.asarray(da.unique(y).compute())


class RankLinearClassifierMixin(ClassifierMixin):
    """The classifiers' part of the fit template: class labels, one-vs-rest problems, prediction."""

    _task = "classification"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._multilabel:
            tags.classifier_tags.multi_label = True
            tags.target_tags.multi_output = True
        return tags

    def _validate_fit_data(self, X, y, reset=True):
        _check_label_types(y, "y")  # before NumPy turns numbers mixed with strings into strings
        if self._multilabel:
            y = _dense(y)  # a sparse multi-label indicator: n_samples x n_labels numbers
        return super()._validate_fit_data(X, y, reset)

    def _check_targets(self, y, classes=None):
        """Class labels; with a stream's ``classes``, all among them.

        A multi-label indicator ``y`` may hold any two values, 0 and 1 or
        -1 and 1, the larger one meaning the label is on.
        """
        if np.ndim(y) == 2 and np.shape(y)[1] == 1:
            y = column_or_1d(y, warn=True)
        if np.ndim(y) == 2:
            if classes is not None:
                raise ValueError(f"{type(self).__name__}.partial_fit takes class labels of shape "
                                 "(n_samples,); fit a multi-label y with fit.")
            if type_of_target(y, input_name="y") != "multilabel-indicator":
                raise ValueError("A 2-D y must be a multi-label indicator matrix of two values (0 and 1, or "
                                 "-1 and 1) with at least two columns; got "
                                 f"{type_of_target(y, input_name='y')!r} targets.")
            if getattr(self, "class_weight", None) is not None:
                raise ValueError("class_weight is not supported with a multi-label y; pass per-sample "
                                 "weights as sample_weight.")
            return np.asarray(y)
        check_classification_targets(_labels_of(y) if is_dask_array(y) else y)
        if classes is not None:
            unknown = np.setdiff1d(_labels_of(y), classes)
            if unknown.size:
                raise ValueError(f"y holds labels {unknown.tolist()} that are not in classes.")
        return y

    def _fit_classes(self, y, sample_weight):
        """The classes of ``y``, at least two (``y`` holds the samples of positive weight).

        A multi-label ``y`` gives the labels' indices, as in scikit-learn's
        ``OneVsRestClassifier``; ``multilabel_`` records which, and
        ``_label_values`` the two values of ``y``, which ``predict`` returns.
        """
        among = " among the samples of positive weight." if sample_weight is not None else "."
        self.multilabel_ = y.ndim == 2
        if self.multilabel_:
            for j in range(y.shape[1]):
                if np.unique(y[:, j]).shape[0] < 2:
                    raise ValueError(f"{type(self).__name__} needs both values of every label; label {j} "
                                     f"holds only {y[0, j]!r}{among}")
            self._label_values = np.unique(y)
            return np.arange(y.shape[1])
        classes = _labels_of(y)
        if classes.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least two classes in y; "
                             f"got only class {classes[0]!r}{among}")
        return classes

    def _stream_classes(self, classes, reset):
        """The classes of a stream: those given to its first call (or fitted), the same on later calls."""
        if getattr(self, "multilabel_", False):
            raise ValueError(f"{type(self).__name__}.partial_fit cannot go on from a multi-label fit; "
                             "fit the labels again with fit.")
        if reset and classes is None:
            if not hasattr(self, "classes_"):
                raise ValueError("classes must be passed on the first call to partial_fit.")
            classes = self.classes_
        if classes is not None:
            _check_label_types(classes, "classes")
        classes_given = None if classes is None else np.unique(np.asarray(classes))
        if not reset:
            if classes_given is not None and not np.array_equal(classes_given, self.classes_):
                raise ValueError(f"classes={classes_given.tolist()} differs from the classes of the first "
                                 f"call to partial_fit, {self.classes_.tolist()}.")
            return self.classes_
        if classes_given.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs at least two classes; got classes="
                             f"{classes_given.tolist()}.")
        if hasattr(self, "classes_") and not np.array_equal(classes_given, self.classes_):
            raise ValueError(f"classes={classes_given.tolist()} differs from the fitted classes "
                             f"{self.classes_.tolist()}.")
        return classes_given

    def _problem_targets(self, y, classes):
        """One binary problem per class beyond two (one-vs-rest), or per label of a multi-label ``y``."""
        if y.ndim == 2:
            on = np.max(y)  # the larger of the indicator's two values marks a label that is on
            return [np.where(y[:, j] == on, 1.0, -1.0) for j in range(y.shape[1])]
        return super()._problem_targets(y, classes)

    def _set_coefficients(self, coefs, intercepts):
        """``coef_`` of shape ``(n_problems, n_features)`` and ``intercept_`` of shape ``(n_problems,)``."""
        self.coef_ = np.vstack(coefs)
        self.intercept_ = np.asarray(intercepts, dtype=np.float64)

    @StreamingMethod
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass of the stochastic solver over a batch of samples.

        Available when the solver runs on batches (``solver="sgd"``;
        ``"soap"`` for AveragePrecisionClassifier, ``"ppd-sg"``,
        ``"ppd-adagrad"`` and ``"sota-s"`` for PartialAUCClassifier; with another solver the
        attribute is missing and its AttributeError names these): the
        solver's state (coefficients, step, generator and whatever else its
        steps carry, see the estimator's Notes) is kept between calls, and
        each call runs one epoch over the samples it is given, as
        scikit-learn's ``SGDClassifier.partial_fit`` does.  After a ``fit``,
        the passes start from its coefficients.  Where the decision function
        is a Platt fit on the scores (PartialAUCClassifier,
        AveragePrecisionClassifier), that fit is redone after each call on
        the call's batch, the only data at hand.

        Every call reads the estimator's current parameters, as
        scikit-learn's SGD estimators do: a ``set_params`` between calls
        (``alpha``, the risk, the loss, the step settings, ``batch_size``,
        ``class_weight``...) takes effect at the next call, and a new
        ``random_state`` reseeds the stream's generator.  The parameters
        the stream's state belongs to cannot change between calls: the
        ``solver`` (and ``fit_intercept`` for ``"sgd"``, ``optimizer`` for
        ``"soap"``); a change raises a ValueError, and ``fit``, or
        ``partial_fit`` on a clone, starts a new stream.  A
        ConvergenceWarning says when the coefficients rank the classes of
        the call's batch worse than chance (area under the ROC curve below
        one half): the steps have not settled yet.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A batch of training data.
        y : array-like of shape (n_samples,)
            Its class labels, all among ``classes``.
        classes : array-like of shape (n_classes,), default=None
            Every class of the stream; required on the first call (unless
            the estimator was fitted), and equal to it on later calls.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the batch's samples (see ``fit``); the
            stochastic solvers draw the samples of a pass with probabilities
            proportional to them.

        Returns
        -------
        self : object
            The estimator.
        """
        return self._partial_fit(X, y, classes, sample_weight)

    @samples_method_doc("Signed scores: positive means ``classes_[1]`` (binary).",
                        "ndarray of shape (n_samples,) or (n_samples, n_classes)",
                        "``X @ coef_.T + intercept_``: one column for two classes, one\n"
                        "per class (one-vs-rest) for more.")
    def decision_function(self, X):
        return arrays.one_column_flat(self._linear_predict(X, "decision_function"))

    @samples_method_doc("Predicted class labels.",
                        "ndarray of shape (n_samples,)",
                        "The class of each sample among ``classes_``: ``classes_[1]`` where\n"
                        "the decision function is positive (two classes), the class of\n"
                        "the largest score otherwise.")
    def predict(self, X):
        self._check_fitted_namespace(X, "predict")
        if getattr(self, "multilabel_", False):
            values = getattr(self, "_label_values", np.arange(2))
            if values.tolist() == [0, 1]:
                return arrays.indicator(self.decision_function(X))
            return arrays.two_valued(self.decision_function(X), values)
        return arrays.labels(self.decision_function(X), to_numpy(self.classes_))

    def _has_proba(self):
        return self.loss == "logistic"

    def _proba_available(self):
        # looked up on the instance, so that subclasses may override _has_proba
        return self._has_proba()

    @available_if(_proba_available)
    def predict_proba(self, X):
        """Class probabilities: the sigmoid of the decision function.

        With more than two classes the one-vs-rest sigmoids are normalised
        to sum to one.  Rank-risk estimators offer it for the logistic loss
        only; a rank-based risk reweights samples, so these are scores on a
        probability scale rather than calibrated probabilities.
        PartialAUCClassifier's and AveragePrecisionClassifier's decision
        functions are Platt fits, so their probabilities are calibrated on
        the training scores (on the latest batch after ``partial_fit``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            The probability of each class, in the order of ``classes_``.
        """
        self._check_fitted_namespace(X, "predict_proba")
        if getattr(self, "multilabel_", False):
            return arrays.sigmoid(self.decision_function(X))  # each label's probability of a 1
        return arrays.probabilities(self.decision_function(X))

    @available_if(_proba_available)
    @samples_method_doc("Logarithm of :meth:`predict_proba`.",
                        "ndarray of shape (n_samples, n_classes)",
                        "The log-probability of each class, in the order of ``classes_``.")
    def predict_log_proba(self, X):
        self._check_fitted_namespace(X, "predict_log_proba")
        return arrays.log(self.predict_proba(X))


class RankLinearRegressorMixin(RegressorMixin):
    """The regressors' part of the fit template: real targets, one problem, prediction."""

    _task = "regression"

    def _check_targets(self, y, classes=None):
        """The targets as floats."""
        return y if is_dask_array(y) else np.asarray(y, dtype=np.float64)

    def _fit_classes(self, y, sample_weight):
        """None: a regression has no classes."""
        return None

    def _stream_classes(self, classes, reset):
        """None: a regression has no classes."""
        return None

    def _set_coefficients(self, coefs, intercepts):
        """``coef_`` of shape ``(n_features,)`` and the number ``intercept_`` of the one problem."""
        (coef,), (intercept,) = coefs, intercepts
        self.coef_ = np.asarray(coef, dtype=np.float64)
        self.intercept_ = float(intercept)

    @StreamingMethod
    def partial_fit(self, X, y, sample_weight=None):
        """One pass of the stochastic solver over a batch of samples.

        Available when the solver runs on batches (``solver="sgd"``; with
        another solver the attribute is missing and its AttributeError
        says so): the solver's state (coefficients, step, generator) is
        kept between calls, and each call runs one epoch over the samples
        it is given, as scikit-learn's ``SGDRegressor.partial_fit`` does.
        After a ``fit``, the passes start from its coefficients.

        Every call reads the estimator's current parameters, as
        scikit-learn's SGD estimators do: a ``set_params`` between calls
        (``alpha``, the risk, the loss, ``learning_rate``, ``batch_size``...)
        takes effect at the next call, and a new ``random_state`` reseeds
        the stream's generator.  ``solver`` and ``fit_intercept``, which
        the stream's state belongs to, cannot change between calls: a
        change raises a ValueError, and ``fit``, or ``partial_fit`` on a
        clone, starts a new stream.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            A batch of training data.
        y : array-like of shape (n_samples,)
            Its targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative weights of the batch's samples (see ``fit``).

        Returns
        -------
        self : object
            The estimator.
        """
        return self._partial_fit(X, y, None, sample_weight)

    @samples_method_doc("Predicted targets ``X @ coef_ + intercept_``.",
                        "ndarray of shape (n_samples,)",
                        "The predictions.")
    def predict(self, X):
        return arrays.one_column_flat(self._linear_predict(X, "predict"))
