"""The loop-detection actor: one LoopDetectionService per conversation."""

from __future__ import annotations

from typing import Any

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.loop_detection import LoopDetectionService, LoopEvent


class LoopDetectionShell(ShellBase):
    """Keeps a detector per session; its state is per user request and not persisted."""

    def __init__(self, settings: OllmSettings) -> None:
        self.settings = settings.services.loop_detection
        self._detectors: dict[str, LoopDetectionService] = {}

    def _detector(self, session_id: str) -> LoopDetectionService:
        detector = self._detectors.get(session_id)
        if detector is None:
            # a conversation met first (or again after a restart) is inside a
            # request, at its first model turn
            detector = self._detectors[session_id] = LoopDetectionService(self.settings)
            detector.begin_request()
        return detector

    def user_message(self, session_id: str) -> None:
        self._detector(session_id).record_user_message()

    def begin_request(self, session_id: str) -> LoopEvent | None:
        return self._detector(session_id).begin_request()

    def turn(self, session_id: str) -> LoopEvent | None:
        return self._detector(session_id).record_turn()

    def tool_call(self, session_id: str, name: str, args: dict[str, Any]) -> LoopEvent | None:
        return self._detector(session_id).record_tool_call(name, args)

    def tool_result(self, session_id: str, name: str, args: dict[str, Any], result: str) -> None:
        self._detector(session_id).record_tool_result(name, args, result)

    def stream(self, session_id: str, text: str) -> LoopEvent | None:
        """Feed the next piece of the streamed answer; report degenerate self-repetition."""
        return self._detector(session_id).check_stream(text)

    def output(self, session_id: str, text: str, *, next_request: bool = False) -> LoopEvent | None:
        """A whole answer; ``next_request`` saves the coordinator a call next turn."""
        return self._detector(session_id).finish_answer(text, next_request=next_request)

    def drop_session(self, session_id: str) -> None:
        self._detectors.pop(session_id, None)
