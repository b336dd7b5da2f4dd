"""The ground floor: the small types every other floor shares.

Nothing here imports from the floors above (only `data` models, `space` and the constants at the
package root), so any module may import a contract without pulling in an implementation:

- `usage`      `Usage`, the one counter of LLM calls, cache hits, tokens and cost
- `memory`     `MemoryUnit`, one stored memory traceable to its source turns
- `local_models` `LocalModels`, the sentence-transformers models a workspace loads
- `closing`    `Closing`, what a `with` block closes (run store, session, served memory)
- `roles`      the role Protocols (extract, decompose, answer, verify, judge, classify), the LLM
               client Protocol, `AnswerResult` and the abstention text
- `records`    `QuestionRecord`, one question's record (the `question_records` columns are
               generated from it), and the failure taxonomy
- `diagnosis`  `DiagnosisInput`, `Proposal`, `DiagnosisResult` and the `Diagnoser` Protocol
"""
