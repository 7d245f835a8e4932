"""What the chat's line editor and its streamed-text writer cost.

Run with ``python -m bench.chat_editor [--repeats R]``. Prints:

- **Paste**: the time from a bracketed paste of 30 KB, 300 KB and 1 MB (lines of
  60 characters) to the message returned by :meth:`LineEditor.read`, through
  prompt_toolkit's pipe input and a dummy output (the key parsing and the buffer,
  not a terminal's drawing); and that the message came back whole.
- **Streaming**: the time :class:`StreamWriter` takes per 1,000 deltas (one word
  each, as Ollama streams) written to an 80-column console in memory, against
  the console's own ``print`` of the same deltas (what the chat did before).
"""

from __future__ import annotations

import argparse
import io
import tempfile
import threading
import time
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from ollm_cli.cli.chat_render import StreamWriter
from ollm_cli.cli.chat_repl import slash_commands
from ollm_cli.cli.line_editor import LineEditor


def _paste_seconds(size: int, home: Path) -> tuple[float, bool]:
    line = "x" * 59 + "\n"
    text = (line * (size // len(line) + 1))[:size].rstrip("\n")
    with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
        editor = LineEditor(
            home / "chat-history",
            slash_commands(),
            terminal_input=keys,
            terminal_output=DummyOutput(),
        )
        # a pipe holds 64 KB: the keys are sent while the editor reads, as a terminal does
        sending = threading.Thread(
            target=keys.send_text, args=("\x1b[200~" + text + "\x1b[201~\r",)
        )
        started = time.perf_counter()
        sending.start()
        got = editor.read("› ")
        sending.join()
        return time.perf_counter() - started, got == text


def _stream_seconds(deltas: list[str], writer: bool) -> float:
    console = Console(file=io.StringIO(), width=80, color_system=None)
    started = time.perf_counter()
    if writer:
        stream = StreamWriter(console)
        for delta in deltas:
            stream.write(delta)
        stream.finish()
    else:
        for delta in deltas:
            console.print(delta, end="", markup=False, highlight=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print("Paste (bracketed, through LineEditor.read):")
    with tempfile.TemporaryDirectory() as folder:
        for size in (30_000, 300_000, 1_000_000):
            runs = [_paste_seconds(size, Path(folder)) for _ in range(args.repeats)]
            whole = all(ok for _, ok in runs)
            best = min(seconds for seconds, _ in runs)
            ms = best * 1000
            print(f"  {size:>9,} chars: {ms:8.1f} ms (best of {args.repeats}), whole: {whole}")

    words = ["lorem", "ipsum", "dolor", "sit", "amet,", "consectetur", "adipiscing", "elit"]
    deltas = [" " + words[n % len(words)] for n in range(20_000)]
    print("Streaming (20,000 one-word deltas to an 80-column console):")
    for label, writer in (("StreamWriter", True), ("console.print", False)):
        best = min(_stream_seconds(deltas, writer) for _ in range(args.repeats))
        per = best / len(deltas) * 1000 * 1000
        print(f"  {label:<14} {best * 1000:8.1f} ms in all, {per:6.1f} ms per 1,000 deltas")


if __name__ == "__main__":
    main()
