"""Pydantic models of the blueprint and network-manifest formats (shared/spec/blueprint.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WORKFLOW_NAME = r"^[a-z][a-z0-9_]{0,47}$"
NODE_ID = r"^[A-Za-z_][A-Za-z0-9_]*$"

NODE_TYPES = ("tool", "llm", "agent", "code", "condition", "loop", "parallel", "recursive", "workflow", "human")


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# Mermaid's node shapes: a box, a decision, a container, another workflow, a model.
Shape = Literal["rect", "rhombus", "subroutine", "parallelogram", "stadium"]


@dataclass(frozen=True, slots=True)
class Drawing:
    """How the run views (/ui, the MCP App) and Mermaid draw a node of a type."""

    shape: Shape = "rect"
    # The fields whose first non-empty text is the node's detail beside its type (its tool, model, workflow).
    label: tuple[str, ...] = ()
    # How its events name the nodes inside it: `id[i].x` (index), `id[i].x` one scope per branch (branch), `id.x` (plain).
    inside: Literal["index", "branch", "plain"] | None = None
    first: int = 0  # the first index of an `index` inside (a loop's items count from 0, iterations from 1)
    workflow: str | None = None  # the field naming a registered workflow it runs, drawn as its inside

    def detail(self, spec: Any) -> str:
        """The node's detail: the first of its `label` fields that holds text, or ""."""
        for name in self.label:
            value = getattr(spec, name, None)
            if value and isinstance(value, str):
                return value
        return ""


class NodeBase(_Model):
    """Fields every node has."""

    # Names of fields holding templates (rendered) and expressions (evaluated), for the compiler.
    template_fields: ClassVar[tuple[str, ...]] = ()
    expression_fields: ClassVar[tuple[str, ...]] = ()
    # Names of fields holding sub-graphs: lists of node specs (`list[NodeSpec]`), or lists of them.
    subgraph_fields: ClassVar[tuple[str, ...]] = ()
    # Its templates see the names it binds inside (a recursive node's `inputs` reads `previous`).
    templates_see_inner_vars: ClassVar[bool] = False
    drawing: ClassVar[Drawing] = Drawing()

    id: Annotated[str, Field(pattern=NODE_ID, max_length=64)]
    type: str
    description: str | None = None
    dependencies: list[str] = Field(default_factory=list)
    retries: Annotated[int, Field(ge=0, le=100)] = 0
    backoff_seconds: Annotated[float, Field(ge=0, le=3600)] = 0.5
    backoff: Literal["exponential", "linear", "fixed"] = "exponential"
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None
    on_error: Literal["fail", "continue"] = "fail"
    metadata: dict[str, Any] = Field(default_factory=dict)

    _as_list_deps = field_validator("dependencies", mode="before")(_as_list)

    def inner_graphs(self) -> list[tuple[str, list[Any]]]:
        """Its sub-graphs under the names its plan keeps them by: a field of nodes under its own name, a field
        of lists of nodes one per list (`steps0`, `steps1`...)."""
        graphs: list[tuple[str, list[Any]]] = []
        for name in self.subgraph_fields:
            value = getattr(self, name)
            if value and isinstance(value[0], list):
                graphs += [(f"{name}{i}", nodes) for i, nodes in enumerate(value)]
            elif value:
                graphs.append((name, value))
        return graphs

    def inner_vars(self) -> frozenset[str]:
        """The names it binds for the nodes inside it (a loop's item and index)."""
        return frozenset()


class ToolNode(NodeBase):
    template_fields = ("tool_args",)
    drawing = Drawing(label=("tool_name",))
    type: Literal["tool"] = "tool"
    tool_name: str
    tool_args: dict[str, Any] = Field(default_factory=dict)


class LLMNode(NodeBase):
    template_fields = ("prompt", "system")
    drawing = Drawing("stadium", label=("model",))
    type: Literal["llm"] = "llm"
    model: str
    provider: str | None = None
    prompt: str
    system: str | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    output_schema: dict[str, Any] | None = None


class AgentMemory(_Model):
    working: bool = True
    episodic: bool = False
    semantic: bool = False
    procedural: bool = False


class InlineAgent(_Model):
    model: str
    provider: str | None = None
    system: str | None = None
    tools: list[str] = Field(default_factory=list)
    workflows: list[str] = Field(default_factory=list)
    memory: AgentMemory = Field(default_factory=AgentMemory)
    max_iterations: Annotated[int, Field(ge=1, le=100)] = 8
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None


class AgentNode(NodeBase):
    template_fields = ("input",)
    drawing = Drawing("stadium", label=("agent",))
    type: Literal["agent"] = "agent"
    agent: str | InlineAgent
    input: str = "{{ inputs }}"


class CodeLimits(_Model):
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None
    memory_mb: Annotated[int, Field(gt=0)] | None = None


class CodeNode(NodeBase):
    template_fields = ("inputs",)
    type: Literal["code"] = "code"
    code: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    limits: CodeLimits = Field(default_factory=CodeLimits)


class ConditionNode(NodeBase):
    expression_fields = ("expression",)
    drawing = Drawing("rhombus")
    type: Literal["condition"] = "condition"
    expression: str
    true_path: list[str] = Field(default_factory=list)
    false_path: list[str] = Field(default_factory=list)

    _as_list_paths = field_validator("true_path", "false_path", mode="before")(_as_list)


class LoopNode(NodeBase):
    template_fields = ("items", "output")
    subgraph_fields = ("body",)
    drawing = Drawing("subroutine", inside="index", first=0)
    type: Literal["loop"] = "loop"
    items: Any = None
    item_var: Annotated[str, Field(pattern=NODE_ID)] = "item"
    body: list[NodeSpec] = Field(min_length=1)
    concurrency: Annotated[int, Field(ge=1, le=1000)] = 1
    max_iterations: Annotated[int, Field(ge=1)] | None = None
    output: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _items_source(cls, data: Any) -> Any:
        if isinstance(data, dict) and "items_source" in data:
            data = dict(data)
            source = data.pop("items_source")
            data.setdefault("items", source)
        return data

    @model_validator(mode="after")
    def _needs_items(self) -> LoopNode:
        if self.items is None:
            raise ValueError("a loop needs `items` (or `items_source`)")
        return self

    def inner_vars(self) -> frozenset[str]:
        return frozenset({self.item_var, "index"})


class ParallelNode(NodeBase):
    template_fields = ("output",)
    subgraph_fields = ("branches",)
    drawing = Drawing("subroutine", inside="branch")
    type: Literal["parallel"] = "parallel"
    branches: list[list[NodeSpec]] = Field(min_length=1)
    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    wait: Literal["all", "any"] = "all"
    output: str | None = None

    def inner_graphs(self) -> list[tuple[str, list[Any]]]:
        return [(f"branch{i}", branch) for i, branch in enumerate(self.branches)]


class RecursiveNode(NodeBase):
    template_fields = ("inputs", "output")
    expression_fields = ("convergence_condition",)
    subgraph_fields = ("body",)
    templates_see_inner_vars = True
    drawing = Drawing("subroutine", label=("workflow_ref", "agent"), inside="index", first=1, workflow="workflow_ref")
    type: Literal["recursive"] = "recursive"
    body: list[NodeSpec] | None = None
    agent: str | None = None
    workflow_ref: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    convergence_condition: str
    max_iterations: Annotated[int, Field(ge=1, le=10_000)]
    output: str | None = None

    @model_validator(mode="after")
    def _one_body(self) -> RecursiveNode:
        given = [k for k in ("body", "agent", "workflow_ref") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("a recursive node needs exactly one of `body`, `agent`, `workflow_ref`")
        return self

    def inner_vars(self) -> frozenset[str]:
        return frozenset({"iteration", "previous"})


class WorkflowNode(NodeBase):
    template_fields = ("inputs",)
    drawing = Drawing("parallelogram", label=("workflow_ref",), inside="plain", workflow="workflow_ref")
    type: Literal["workflow"] = "workflow"
    workflow_ref: str
    inputs: dict[str, Any] = Field(default_factory=dict)


class OnTimeoutDefault(_Model):
    default: Any


class HumanNode(NodeBase):
    """A question to a person: `prompt` with an answer `schema`, or an approval gate (`approval`)."""

    template_fields = ("prompt", "approval")
    type: Literal["human"] = "human"
    prompt: str | None = None
    # The question of an approval gate: the answer is {approved: bool, reason: str}; a rejection fails the node.
    approval: str | None = None
    # JSON Schema of the answer (an object); default {answer: string}.
    answer_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    # `timeout_seconds` is how long to wait for an answer, across restarts; then `fail`, or take the default.
    on_timeout: Literal["fail"] | OnTimeoutDefault = "fail"

    @model_validator(mode="after")
    def _one_question(self) -> HumanNode:
        if (self.prompt is None) == (self.approval is None):
            raise ValueError("a human node needs exactly one of `prompt` (a question) and `approval` (a gate)")
        if self.approval is not None and self.answer_schema is not None:
            raise ValueError("an approval gate's answer is {approved, reason}: it takes no `schema`")
        return self


NodeSpec = Annotated[
    ToolNode
    | LLMNode
    | AgentNode
    | CodeNode
    | ConditionNode
    | LoopNode
    | ParallelNode
    | RecursiveNode
    | WorkflowNode
    | HumanNode,
    Field(discriminator="type"),
]

NODE_MODELS: dict[str, type[NodeBase]] = {
    "tool": ToolNode,
    "llm": LLMNode,
    "agent": AgentNode,
    "code": CodeNode,
    "condition": ConditionNode,
    "loop": LoopNode,
    "parallel": ParallelNode,
    "recursive": RecursiveNode,
    "workflow": WorkflowNode,
    "human": HumanNode,
}


SCHEDULE_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # a schedule's id, declared or given to schedule_create


class DeclaredSchedule(_Model):
    """A schedule a blueprint brings: created or updated (by its stable id) when a server registers it."""

    id: Annotated[str, Field(pattern=SCHEDULE_ID)] | None = None
    spec: dict[str, Any]
    inputs: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Any] | None = None


class Limits(_Model):
    """How many runs of a workflow may run at once and start per minute, for every server on one run store."""

    max_concurrent_runs: Annotated[int, Field(ge=1)] | None = None
    runs_per_minute: Annotated[int, Field(ge=1)] | None = None
    # reject: a run over a limit is refused (rate_limited, retry_after_seconds); queue: it waits as `queued`
    # and starts in its turn, as soon as the limits allow.
    on_limit: Literal["reject", "queue"] = "reject"

    def words(self) -> str:
        """What the limits hold, as a refusal names them: "1 at once, 2 a minute"."""
        held = [f"{self.max_concurrent_runs} at once" if self.max_concurrent_runs else "",
                f"{self.runs_per_minute} a minute" if self.runs_per_minute else ""]
        return ", ".join(h for h in held if h)


class Blueprint(_Model):
    schema_version: Literal["1"] = "1"
    name: Annotated[str, Field(pattern=WORKFLOW_NAME)]
    description: str | None = None
    inputs: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    outputs: dict[str, Any] | None = None
    budget_usd: Annotated[float, Field(ge=0)] | None = None
    max_parallel: Annotated[int, Field(ge=1, le=10_000)] = 16
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None
    # `task`: an MCP client that negotiated the tasks extension always gets a task for a call (`auto`: when
    # the run outlasts a short budget); a 2026 client without it is refused (it must take a task).
    execution: Literal["auto", "task"] = "auto"
    nodes: list[NodeSpec] = Field(min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    pinned: bool = False  # a large MCP catalogue still lists this workflow's own tool (ICE_MCP_CATALOGUE_MAX)
    tags: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=32)  # workflow_search
    schedules: list[DeclaredSchedule] = Field(default_factory=list)  # the workflow runs on its own
    limits: Limits | None = None  # held in the run store at admission, whatever starts the run

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)


class NetworkWorkflow(_Model):
    id: Annotated[str, Field(pattern=NODE_ID, max_length=64)]
    ref: str
    after: list[str] = Field(default_factory=list)
    inputs: dict[str, Any] = Field(default_factory=dict)

    _as_list_after = field_validator("after", mode="before")(_as_list)


class NetworkManifest(_Model):
    api_version: Literal["network.v0"] = "network.v0"
    name: Annotated[str, Field(pattern=WORKFLOW_NAME)]
    description: str | None = None
    global_: dict[str, Any] = Field(default_factory=dict, alias="global")
    workflows: list[NetworkWorkflow] = Field(min_length=1)
    max_parallel: Annotated[int, Field(ge=1)] = 8
    schedules: list[DeclaredSchedule] = Field(default_factory=list)  # the network runs on its own (no inputs)

    @property
    def budget_usd(self) -> float | None:
        value = self.global_.get("budget_usd")
        return float(value) if isinstance(value, int | float) else None


for _model in (LoopNode, ParallelNode, RecursiveNode):
    _model.model_rebuild()
