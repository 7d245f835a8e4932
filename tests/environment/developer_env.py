"""Common developer variables with realistic non-secret values: what tools should get.

``DEVELOPER_ENV`` is what a developer's shell holds on a laptop or a CI runner,
with nothing secret in it. Every variable the sanitizer removes from it is a
false removal; ``KNOWN_FALSE_REMOVALS`` names the ones the *default deny
patterns* of ``config/settings.py`` (``AWS_*``, ``GITHUB_*``) still cause, so that
the count cannot grow unseen. ``bench.safety`` prints the figure.
"""

from __future__ import annotations

DEVELOPER_ENV: dict[str, str] = {
    # shell and terminal
    "PATH": "/home/alice/.local/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/alice",
    "USER": "alice",
    "LOGNAME": "alice",
    "SHELL": "/bin/zsh",
    "TERM": "xterm-256color",
    "TERM_PROGRAM": "vscode",
    "COLORTERM": "truecolor",
    "LANG": "en_US.UTF-8",
    "LC_ALL": "en_US.UTF-8",
    "TZ": "Europe/Berlin",
    "EDITOR": "nvim",
    "VISUAL": "code --wait",
    "PAGER": "less -R",
    "LESS": "-FRX",
    "HISTSIZE": "100000",
    "TMPDIR": "/tmp",
    "PWD": "/home/alice/src/ollm",
    "OLDPWD": "/home/alice/src",
    "XDG_CONFIG_HOME": "/home/alice/.config",
    "XDG_DATA_HOME": "/home/alice/.local/share",
    "XDG_CACHE_HOME": "/home/alice/.cache",
    "HOSTNAME": "alice-laptop",
    # languages and package managers
    "JAVA_HOME": "/usr/lib/jvm/java-21-openjdk-amd64",
    "MAVEN_OPTS": "-Xmx2g",
    "GRADLE_USER_HOME": "/home/alice/.gradle",
    "GOPATH": "/home/alice/go",
    "GOROOT": "/usr/local/go",
    "GOPROXY": "https://proxy.golang.org,direct",
    "GOFLAGS": "-mod=mod",
    "CGO_ENABLED": "0",
    "CARGO_HOME": "/home/alice/.cargo",
    "RUSTUP_HOME": "/home/alice/.rustup",
    "RUST_BACKTRACE": "1",
    "RUST_LOG": "info,hyper=warn",
    "NVM_DIR": "/home/alice/.nvm",
    "NODE_ENV": "development",
    "NODE_PATH": "/usr/lib/node_modules",
    "npm_config_cache": "/home/alice/.npm",
    "NPM_CONFIG_PREFIX": "/home/alice/.npm-global",
    "PNPM_HOME": "/home/alice/.local/share/pnpm",
    "YARN_CACHE_FOLDER": "/home/alice/.cache/yarn",
    "PYTHONPATH": "/home/alice/src/ollm/src",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "VIRTUAL_ENV": "/home/alice/src/ollm/.venv",
    "CONDA_PREFIX": "/home/alice/miniconda3/envs/ml",
    "CONDA_DEFAULT_ENV": "ml",
    "PIP_INDEX_URL": "https://pypi.corp.example/simple",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "UV_CACHE_DIR": "/home/alice/.cache/uv",
    "POETRY_VIRTUALENVS_IN_PROJECT": "true",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HOME": "/home/alice/.cache/huggingface",
    "CUDA_VISIBLE_DEVICES": "0",
    "OMP_NUM_THREADS": "4",
    # network: proxies and the certificate authorities behind them
    "HTTP_PROXY": "http://proxy.corp.example:3128",
    "HTTPS_PROXY": "http://proxy.corp.example:3128",
    "NO_PROXY": "localhost,127.0.0.1,.corp.example",
    "http_proxy": "http://proxy.corp.example:3128",
    "https_proxy": "http://proxy.corp.example:3128",
    "no_proxy": "localhost,127.0.0.1,.corp.example",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "SSL_CERT_DIR": "/etc/ssl/certs",
    "NODE_EXTRA_CA_CERTS": "/usr/local/share/ca-certificates/corp-root.crt",
    "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    "CURL_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    "GIT_SSL_CAINFO": "/etc/ssl/certs/ca-certificates.crt",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    "AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    # git and containers
    "GIT_AUTHOR_NAME": "Alice Example",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Alice Example",
    "GIT_COMMITTER_EMAIL": "alice@example.com",
    "DOCKER_BUILDKIT": "1",
    "COMPOSE_PROJECT_NAME": "ollm",
    "DOCKER_HOST": "tcp://build-host.corp.example:2376",
    "KUBECONFIG": "/home/alice/.kube/config",
    # CI
    "CI": "true",
    "BUILD_NUMBER": "1842",
    "GITHUB_ACTIONS": "true",
    "GITHUB_SHA": "3f786850e387550fdab836ed7e6dc881de23001b",
    "GITHUB_WORKSPACE": "/home/runner/work/ollm/ollm",
    "AWS_REGION": "eu-central-1",
    "AWS_PROFILE": "dev",
    "MAX_TOKENS": "4096",
}

#: Removed by the default deny patterns (``AWS_*``, ``GITHUB_*``), a decision of the
#: configuration: the user can narrow ``services.environment.denyPatterns``.
KNOWN_FALSE_REMOVALS: frozenset[str] = frozenset(
    {"GITHUB_ACTIONS", "GITHUB_SHA", "GITHUB_WORKSPACE", "AWS_REGION", "AWS_PROFILE"}
)
