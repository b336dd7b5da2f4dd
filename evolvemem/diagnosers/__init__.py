"""Diagnosers read a round's failures and propose the next change. All return a `Proposal`."""
from evolvemem.diagnosers.base import DIAGNOSERS, DiagnosisResult, make_diagnoser

__all__ = ["DIAGNOSERS", "DiagnosisResult", "make_diagnoser"]
