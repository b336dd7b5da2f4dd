"""`tpe`: Optuna's TPE sampler over the config's action space, one trial per round via ask/tell (with
`--candidates K`, K trials asked together under the constant-liar strategy).

Every evaluated config is told to the study (the starting config and resumed rounds too), so
the sampler's model is rebuilt exactly from the run store on resume; a config screened out on
its minibatch is told its estimated score (loop/screening.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evolvemem.contracts.diagnosis import DiagnosisInput, DiagnosisResult, Proposal
from evolvemem.space.acting import config_idle_changes
from evolvemem.space.ops import config_to_trial_params, optuna_distributions, suggest_config


if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.llm.client import LLMClient


class TPEDiagnoser:
    name = "tpe"

    def __init__(self, seed: int):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # constant liar: trials asked together (parallel candidates) count as bad until told, so
        # they spread out instead of sampling the same region; one at a time it samples as without
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=3, constant_liar=True)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.pending: dict[str, Any] = {}  # config fingerprint -> trial

    def diagnose(self, inp: DiagnosisInput, config: RetrievalConfig) -> DiagnosisResult:
        self._close_unevaluated()
        return DiagnosisResult(self._ask(config))

    def alternatives(self, inp: DiagnosisInput, config: RetrievalConfig, k: int) -> list[Proposal]:
        """`k` further trials asked beside the round's first (parallel candidates)."""
        return [self._ask(config) for _ in range(k)]

    def _ask(self, config: RetrievalConfig) -> Proposal:
        trial = self.study.ask()
        candidate = suggest_config(trial, base=config)
        changes = {k: v for k, v in candidate.values().items() if config.values()[k] != v}
        # a sampled value the code ignores under the sampled config is left out (space/acting.py);
        # the trial is told the score of the config that is evaluated, which it does not change
        idle = config_idle_changes(config, changes)
        changes = {k: v for k, v in changes.items() if k not in idle}
        self.pending[config.with_changes(changes)[0].fingerprint()] = trial
        return Proposal(changes=changes, rationale=f"TPE trial {trial.number}")

    def _close_unevaluated(self) -> None:
        """A trial the loop changed before evaluating it (a frozen or model-only setting dropped,
        an exploration instead) was never scored as asked: closed as failed when the round's
        evaluated config turns out to be another (or, at the latest, before the next ask), so the
        study learns only from the configs that were really evaluated (added by `observe`). The
        trials of a round's other candidates stay open until each is told its screening."""
        import optuna

        for stale in self.pending.values():
            self.study.tell(stale, state=optuna.trial.TrialState.FAIL)
        self.pending.clear()

    def observe(self, config: RetrievalConfig, score: float) -> None:
        import optuna

        trial = self.pending.pop(config.fingerprint(), None)
        if trial is not None:
            self.study.tell(trial, score)
            return
        self._close_unevaluated()
        params = config_to_trial_params(config)
        flat = optuna_distributions(config.space)
        dists = {
            k: (flat[k] if k in flat else optuna.distributions.CategoricalDistribution([True, False])) for k in params
        }
        self.study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=score))


def create(seed: int, client: LLMClient | None) -> TPEDiagnoser:
    return TPEDiagnoser(seed)
