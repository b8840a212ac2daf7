"""The estimators' constructors and shared docstrings, written once from their parameters and texts.

scikit-learn reads an estimator's parameters from the signature of its
``__init__``, which must take each one as a keyword and store it as given.
:func:`keyword_init` writes that ``__init__`` from the defaults, so that the
estimators that share parameters share their declaration too;
:func:`fit_doc` and :func:`samples_method_doc` write the docstrings of the
methods that share their parameters.
"""

import inspect


def keyword_init(**defaults):
    """An ``__init__`` that takes the names of ``defaults`` as keyword-only parameters and stores each.

    Parameters
    ----------
    **defaults
        Each parameter's default, in the order of the signature.

    Returns
    -------
    callable
        ``__init__(self, *, name=default, ...)``, whose signature
        (``inspect.signature``, which scikit-learn's ``get_params`` and
        ``clone`` read) lists the parameters.  It sets every parameter, the
        value given or the default, as an attribute of the same name and
        raises the TypeError of a Python constructor for a positional
        argument or an unknown keyword.
    """
    signature = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value)
           for name, value in defaults.items()]
    )

    def __init__(self, *args, **params):
        name = f"{type(self).__name__}.__init__()"
        if args:
            raise TypeError(f"{name} takes 1 positional argument but {len(args) + 1} were given")
        try:
            given = signature.bind(self, **params).arguments
        except TypeError as error:
            raise TypeError(f"{name} {error}") from None
        for parameter, default in defaults.items():
            setattr(self, parameter, given.get(parameter, default))

    __init__.__signature__ = signature
    return __init__


def parameter_defaults(estimator_class, leave_out=()):
    """The defaults of an estimator's parameters, in the order of its signature.

    Parameters
    ----------
    estimator_class : type
        An estimator whose ``__init__`` takes keyword parameters.
    leave_out : tuple of str, default=()
        Parameters not to return.

    Returns
    -------
    dict of str to object
    """
    parameters = list(inspect.signature(estimator_class.__init__).parameters.values())[1:]
    return {p.name: p.default for p in parameters if p.name not in leave_out}


def options_doc(names, *, first=()):
    """The numpydoc type of a string parameter: ``"a", "b", ...`` in braces' contents, quoted.

    Parameters
    ----------
    names : iterable of str
        The accepted values, in the order to list them.
    first : tuple of str, default=()
        Values listed before ``names`` (for example ``("auto",)``).

    Returns
    -------
    str
        ``"a", "b", ...``, to be written between ``{`` and ``}``.
    """
    return ", ".join(f'"{name}"' for name in (*first, *names))


_SAMPLES_METHOD_DOC = """{summary}

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        {returns}
            {description}
        """


_FIT_DOC = """{summary}

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,) or (n_samples, n_labels)
            {y}
        sample_weight : array-like of shape (n_samples,), default=None
            {sample_weight}

        Returns
        -------
        self : object
            The fitted estimator.
        """


def _method_doc(template, **texts):
    """A decorator that writes ``texts``, each continued at the indent of a description, into ``template``."""
    def decorate(method):
        method.__doc__ = template.format(**{k: v.replace("\n", "\n" + " " * 12) for k, v in texts.items()})
        return method

    return decorate


def samples_method_doc(summary, returns, description):
    """A decorator that gives a method of the samples ``X`` alone its numpydoc docstring."""
    return _method_doc(_SAMPLES_METHOD_DOC, summary=summary, returns=returns, description=description)


def fit_doc(summary, y, sample_weight):
    """A decorator that gives a ``fit(X, y, sample_weight=None)`` its numpydoc docstring."""
    return _method_doc(_FIT_DOC, summary=summary, y=y, sample_weight=sample_weight)
