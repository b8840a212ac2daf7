"""The README's quick start must run as printed."""

import re
import warnings
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quick_start_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python block"
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
    # the quick start fits a classifier and a regressor
    assert hasattr(namespace["clf"][-1], "coef_")
    assert hasattr(namespace["reg"][-1], "coef_")
    assert hasattr(namespace["ap"][-1], "calibration_")


def test_docs_home_page_quick_start_runs(capsys):
    index = README.parent / "doc" / "index.rst"
    text = index.read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    assert blocks, "doc/index.rst has no python block"
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            code = "\n".join(line[4:] for line in block.splitlines())
            exec(compile(code, str(index), "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in printed]
    assert names == ["LogisticRegression", "PartialAUCClassifier", "PartialAUCClassifierCV"]
    assert all(0.0 <= float(line.split()[1]) <= 1.0 for line in printed)
