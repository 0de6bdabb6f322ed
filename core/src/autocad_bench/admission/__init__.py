"""Admission: the checks between a configuration file and the first launch."""

from autocad_bench.admission.admit import Admission, AdmissionOptions, admit, model_spec
from autocad_bench.admission.report import AdmissionCheck, AssignmentReport, PlanReport

__all__ = [
    "Admission",
    "AdmissionCheck",
    "AdmissionOptions",
    "AssignmentReport",
    "PlanReport",
    "admit",
    "model_spec",
]
