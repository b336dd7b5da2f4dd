"""Everything a run builds once, by job:

- `core`         `Workspace`: memories per conversation (the fact store), their indexes and retrievers
- `stores`       `MemoryStores`: the other memory stores, built when a config first needs them
- `packs`        `ConversationPack`: one conversation packed for another process, and unpacked there
- `memory_rows`  the memories a run records at its start, and those it restores on resume
"""

from evolvemem.workspace.core import SetupStats, Workspace, consolidated
from evolvemem.workspace.packs import ConversationPack, pack_conversation, workspace_from_pack
from evolvemem.workspace.stores import ProgressFn

__all__ = [
    "ConversationPack",
    "ProgressFn",
    "SetupStats",
    "Workspace",
    "consolidated",
    "pack_conversation",
    "workspace_from_pack",
]
