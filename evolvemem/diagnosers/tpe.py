"""`tpe`: Optuna's TPE sampler over the same registry, one trial per round via ask/tell.

Every evaluated config is told to the study (the starting config and resumed rounds too), so
the sampler's model is rebuilt exactly from the run store on resume; a config screened out on
its minibatch is told its estimated score (loop/screening.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evolvemem.contracts.diagnosis import DiagnosisInput, DiagnosisResult, Proposal
from evolvemem.space.ops import config_to_trial_params, optuna_distributions, suggest_config


if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient


class TPEDiagnoser:
    name = "tpe"

    def __init__(self, seed: int):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(direction="maximize",
                                         sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=3))
        self.pending: dict[str, Any] = {}  # config fingerprint -> trial

    def diagnose(self, inp: DiagnosisInput, config: Any) -> DiagnosisResult:
        trial = self.study.ask()
        candidate = suggest_config(trial, base=config)
        self.pending[candidate.fingerprint()] = trial
        changes = {k: v for k, v in candidate.values().items() if config.values()[k] != v}
        return DiagnosisResult(Proposal(changes=changes, rationale=f"TPE trial {trial.number}"))

    def observe(self, config: Any, score: float) -> None:
        import optuna

        trial = self.pending.pop(config.fingerprint(), None)
        # a trial the loop changed before evaluating it (a frozen or model-only setting dropped,
        # an exploration instead) will never be scored as asked: closed as failed, so the study
        # learns only from the configs that were really evaluated (added below)
        for stale in self.pending.values():
            self.study.tell(stale, state=optuna.trial.TrialState.FAIL)
        self.pending.clear()
        if trial is not None:
            self.study.tell(trial, score)
            return
        params = config_to_trial_params(config)
        flat = optuna_distributions()
        dists = {k: (flat[k] if k in flat else optuna.distributions.CategoricalDistribution([True, False]))
                 for k in params}
        self.study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=score))


def create(seed: int, client: LLMClient | None) -> TPEDiagnoser:
    return TPEDiagnoser(seed)
