"""`dspark.testbed.smollm2` is another name of `dspark.formats.smollm2` (the SmolLM2-135M-Instruct loader): the
same module object, so attributes set on either are seen by both. Its last user is `dspark.demo`; everything else
imports `dspark.formats.smollm2`, and this alias goes once the demo does too."""
from __future__ import annotations

import sys

from dspark.formats import smollm2 as _loader

sys.modules[__name__] = _loader
