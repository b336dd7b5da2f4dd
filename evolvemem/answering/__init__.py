"""The answer path as a pipeline stage: route → retrieve → (refresh) → answer → verify → judge/retry,
for one question (`path`) and for a batch of questions under one config (`evaluate`).

Which memory stores a config reads is declared by the modules that own the settings
(`stores`); the router, the retry judge and the refresher plug in behind small Protocols
(`plugins`). Evaluating is a pure function of (workspace, config, questions): the stores a
config needs are built by the caller (the session) before it evaluates."""
