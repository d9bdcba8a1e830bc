"""Tidepool settings. Every knob comes from the environment; defaults give the embedded setup.

| variable | default | meaning |
|---|---|---|
| DEBUG | 1 | Django debug mode (error pages with tracebacks and every URL pattern). Set 0 in production; `bin/start` sets it from TIDEPOOL_DEBUG (default 0). |
| SECRET_KEY | a development key | Required (and must not be the development key) when DEBUG=0. |
| ALLOWED_HOSTS | 127.0.0.1,localhost,[::1] | Comma-separated host names the console answers. |
| CSRF_TRUSTED_ORIGINS | (empty) | Comma-separated origins, e.g. https://tidepool.example.com |
| DATABASE_URL | sqlite:///<project>/db.sqlite3 | e.g. postgres://postgres@127.0.0.1:5432/tidepool |
| REDIS_URL | (unset) | Unset: in-process channel layer, no Celery broker. Set: channel layer + Celery broker. |
| TIDEPOOL_EXECUTOR | local | `local` runs pods as processes here; `celery` sends them to node workers; `agents`: node agents with their node's key read them (bin/node-agent). |
| TIDEPOOL_EMBEDDED_SCHEDULER | 1 with local executor | Run the scheduler loop inside the console process (`manage.py serve`). |
| TIDEPOOL_SCHEDULER_INTERVAL | 3 | Seconds between scheduling cycles (a submission or pod exit triggers one at once). |
| TIDEPOOL_SCHEDULER_MIN_GAP | 0.5 | Least rest between two cycles; wake-ups meanwhile are answered by one cycle (scheduler/loop/runner.py). |
| TIDEPOOL_GRACE_SECONDS | 30 | Default preemption grace period between SIGTERM and SIGKILL. |
| TIDEPOOL_NODE_TIMEOUT | 60 | Seconds without heartbeat before a node is marked lost. |
| TIDEPOOL_HEARTBEAT_SECONDS | 10 | How often node workers heartbeat. |
| TIDEPOOL_RESTART_BACKOFF_BASE | 5 | Seconds before the first automatic restart; doubles per restart. |
| TIDEPOOL_RESTART_BACKOFF_CAP | 300 | Upper bound of the restart backoff. |
| TIDEPOOL_HANG_TIMEOUT | 0 | Seconds without progress report before a running job restarts (0: off). |
| TIDEPOOL_DATA_DIR | <project>/var | Pod logs, progress and exit files (`pods/<job uid>/`), default code directories. |
| TIDEPOOL_CHECKPOINT_ROOT | <TIDEPOOL_DATA_DIR>/checkpoints | Default checkpoint directories: `<root>/<job uid>` (share it between nodes). |
| TIDEPOOL_WORKSPACE_ROOT | <TIDEPOOL_DATA_DIR>/workspaces | Workspace data roots: a job's own checkpoint_dir / code_mount / data_mount must lie in `<root>/<workspace>/`. |
| TIDEPOOL_POD_USER | (empty: the worker's user) | User pods run as (setuid/setgid when the worker is root); `{workspace}` in it is replaced by the job's workspace, e.g. `tp-{workspace}`. |
| TIDEPOOL_POD_ENV_ALLOW | PATH,LANG,LANGUAGE,LC_*,TZ,TERM,TMPDIR,LD_LIBRARY_PATH,CUDA_HOME,NCCL_* | Variables of the worker's environment a pod inherits (`X*`: a prefix); nothing else of it. |
| TIDEPOOL_RECONCILE_SECONDS | 5 | How often a node worker (and the embedded executor) reconciles its pods with the database. |
| TIDEPOOL_LEASE_SECONDS | 15 | Lease of the embedded console and of each node worker; renewed every third of it. |
| TIDEPOOL_HTTPS | 1 when DEBUG=0 | Secure cookies, HSTS and HTTPS redirect. |
| TIDEPOOL_METRICS_TOKEN | (empty) | `Authorization: Bearer <token>` may scrape /metrics (docs/metrics.md). |
| TIDEPOOL_METRICS_ALLOW | 127.0.0.1/32,::1/128 | Networks that may scrape /metrics without the token. |
| TIDEPOOL_SCHEDULER_METRICS_PORT | (unset) | `run_scheduler` serves its cycle histogram (Prometheus) on this port. |
| TIDEPOOL_SCHEDULER_METRICS_ADDR | 127.0.0.1 | The address that port listens on. |
| TIDEPOOL_DB_POOL | 0 | 1: a PostgreSQL connection pool per process (psycopg_pool); `bin/cluster` sets it for the websocket server, the scheduler and the node workers. Pooled connections are checked when handed out. |
| TIDEPOOL_DB_POOL_SIZE | 8 | Most pooled connections per process. |
| TIDEPOOL_DB_CONN_MAX_AGE | 0 | Without a pool: seconds a connection is kept for the next request (Django's CONN_MAX_AGE; 0: one per request). Kept connections are checked before reuse (CONN_HEALTH_CHECKS). `bin/cluster` sets 300 for the HTTP workers. |
| TIDEPOOL_WEB_CONCURRENCY | 1 | HTTP requests inside Django at once per ASGI process (config/asgi.py); others wait their turn (0: no limit). The WSGI workers behind nginx (config/serving_http.py) run one each by design. |
| STATIC_ROOT | <project>/staticfiles | Where `collectstatic` puts files (served by WhiteNoise in config/asgi.py when DEBUG=0). |
| TIDEPOOL_MAX_BODY_BYTES | 1048576 | Largest request body (DATA_UPLOAD_MAX_MEMORY_SIZE); larger ones get 413/400 unread. |
| TIDEPOOL_IDEMPOTENCY_KEEP_HOURS | 24 | Hours a submission's `Idempotency-Key` is kept for replay (docs/api.md); the scheduler's housekeeping deletes older keys, after which the key submits anew. |
| TIDEPOOL_PASSWORD_ITERATIONS | 1000000 | PBKDF2 iterations of password hashes (Django's default); each login pays them. |
| TIDEPOOL_REDIS_SOCKET_TIMEOUT | 5 | Channel layer's Redis read/write timeout (channels-redis's pub/sub layer reads 0.1 s at a time, so an idle socket never meets it). |
| TIDEPOOL_REDIS_RETRIES | 3 | Times a channel-layer command reconnects and retries after its Redis connection broke (a restart), 0.05-0.5 s apart; then it fails and a websocket handshake is refused. |

`bin/start` (the embedded default) reads these, then sets DEBUG, TIDEPOOL_HTTPS=0 (it serves plain
HTTP on its address), SECRET_KEY (unless set: one made once, kept in `<TIDEPOOL_DATA_DIR>/secret_key`)
and PATH (`.venv/bin` first, which pods inherit):

| variable | default | meaning |
|---|---|---|
| TIDEPOOL_ADDR | 127.0.0.1 | Address the console listens on. |
| TIDEPOOL_PORT | 8000 | Its port (the CLI's default server is http://127.0.0.1:8000: give `--server` for another). |
| TIDEPOOL_DEBUG | 0 | 1: DEBUG=1 (Django's debug pages). Static files are served either way (config/asgi.py: WhiteNoise with DEBUG=0). |

Node workers (`celery -A config worker -Q node.<name>`) also read:

| variable | default | meaning |
|---|---|---|
| TIDEPOOL_NODE_NAME | from the `-Q node.<name>` queue | The node this worker runs. |
| TIDEPOOL_NODE_GPUS | (unset: detect with NVML) | Declared GPU count; set it to skip NVML (0: a CPU node). |
| TIDEPOOL_NODE_GPU_TYPE | (empty) | Declared GPU model, with TIDEPOOL_NODE_GPUS. |
| TIDEPOOL_NODE_CPU | this host's cores | Declared CPU cores. |
| TIDEPOOL_NODE_MEMORY_GIB | this host's memory | Declared memory in GiB. |
| TIDEPOOL_NODE_RESOURCE_TYPE | general | The node's pool: `general` or `lingjun`. |
| TIDEPOOL_NODE_ADDRESS | 127.0.0.1 | Address other nodes reach this one at (MASTER_ADDR of rank 0). |
| TIDEPOOL_GPU_SAMPLE_SECONDS | 60 | At most one NVML sample round per node this often (GPU use per job). |

Pods (the node worker, and the local executor) — docs/runtime.md ("Pods as containers"):

| variable | default | meaning |
|---|---|---|
| TIDEPOOL_POD_RUNTIME | host | `host`: process groups on the node, each in cgroups of its own where a root worker can make them (bin/start, nodes without Podman); `podman`: containers (rootful Podman with runc; `bin/cluster` sets it when Podman is installed). |
| TIDEPOOL_POD_IMAGE | localhost/tidepool-pod:<version> | The node's default image for jobs that name none (`bin/build-pod-image` builds the default one). |
| TIDEPOOL_POD_PULL | missing | Pull policy: `never` (only the node's image store), `missing` (pull what the store lacks), `always` (pull at every start). An image that cannot be had keeps the pod Pending with the reason, retried with backoff. |
| TIDEPOOL_POD_REGISTRY | (empty) | The operator's registry (`host[:port]`), put in front of image names that name no registry (`team/train:v2` → `registry.example.com:5000/team/train:v2`). |
| TIDEPOOL_POD_REGISTRY_AUTH_FILE | (empty) | Credentials for pulls: a containers-auth.json file (`podman login --authfile FILE REGISTRY` writes one), passed as `--authfile`. |
| TIDEPOOL_POD_UID | 65534 | Uid (and gid) pods run as inside containers when TIDEPOOL_POD_USER names no host user; never 0. |
| TIDEPOOL_POD_PIDS_LIMIT | 4096 | Most processes (and threads) in one container, or one host pod in its cgroups. |
| TIDEPOOL_POD_DEFAULT_MEMORY_GIB | 4 | Memory limit of a container (or a host pod in its cgroups) whose role asks none. |
| TIDEPOOL_POD_NETWORK | job | `job`: a Podman network per job behind the node's pod firewall; `none`: no network; `routed` (node agents only, bin/node-agent): one pod subnet per node, a job's pods meet across hosts (docs/runtime.md). |
| TIDEPOOL_POD_SUBNETS | 10.213.0.0/16 | The pool the per-job /24 networks come from (the firewall drops it from reaching the host); `routed`: this node's own pod subnet, e.g. 10.213.7.0/24. |
| TIDEPOOL_POD_CLUSTER_NETWORK | 10.213.0.0/16 | `routed` (node agents): the network every node's pod subnet lies in. |
| TIDEPOOL_POD_BLOCKED_NETWORKS | (empty) | Comma-separated addresses/networks pods may not reach (the database, broker and console hosts). |
| TIDEPOOL_PODMAN | podman | The podman binary. |
| TIDEPOOL_POD_OCI_RUNTIME | runc | Podman's `--runtime` (crun refuses the hybrid cgroup v1 layout). |
| TIDEPOOL_MASTER_PORT_RANGE | 29600-29999 | Ports `MASTER_PORT` is chosen from, one per job attempt, free among the jobs running on its nodes (torchrun's default 29500 is outside it). |
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEVELOPMENT_SECRET_KEY = "django-insecure-tidepool-development-key-change-me"

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
if not DEBUG and SECRET_KEY == DEVELOPMENT_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is the development default but DEBUG is off: set SECRET_KEY to a long random "
        "value (python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from here: no CDN
    "channels",
    "scheduler",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# With DEBUG=0 WhiteNoise serves the collected static files in front of Django (config/asgi.py
# StaticFiles), not as a middleware: a sync-only middleware slows every request under ASGI.

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

TIDEPOOL_DB_POOL = env_bool("TIDEPOOL_DB_POOL", False)
# Every connection is checked before it is used (CONN_HEALTH_CHECKS): a persistent one at its first
# query of a request (or after close_old_connections() in the scheduler loop and node workers), a
# pooled one by psycopg_pool's check when it is handed out. A connection PostgreSQL ended
# (pg_terminate_backend, a restart, a failover) is then replaced instead of answering 500.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # A pool keeps its connections itself: Django refuses CONN_MAX_AGE with one.
        conn_max_age=0 if TIDEPOOL_DB_POOL else int(os.environ.get("TIDEPOOL_DB_CONN_MAX_AGE", "0")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + immediate transactions: the scheduler thread and web requests write concurrently.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests use a file too: an in-memory shared-cache database fails with "table is locked" instead of
    # waiting when the executor's threads write while a test does.
    DATABASES["default"]["TEST"] = {
        # One per test process, so a crashed run's WAL files can never meet a new database.
        "NAME": os.environ.get("TIDEPOOL_TEST_SQLITE")
        or os.path.join(tempfile.gettempdir(), f"tidepool-test-{os.getpid()}.sqlite3")
    }

elif DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql"):
    # One test database per test process, so two runs on one server never share one.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
    if TIDEPOOL_DB_POOL:
        # Under ASGI each request runs in a thread of its own, so without a pool every request opens
        # (and PostgreSQL forks) a new connection. A pool per process keeps them open.
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": int(os.environ.get("TIDEPOOL_DB_POOL_SIZE", "8")),
            "timeout": 30,
        }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# PBKDF2 with an operator-set iteration count (config/hashers.py). Hashes made with another count
# still verify and are re-hashed at the next login.
TIDEPOOL_PASSWORD_ITERATIONS = int(os.environ.get("TIDEPOOL_PASSWORD_ITERATIONS", "1000000"))
PASSWORD_HASHERS = [
    "config.hashers.TidepoolPBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]

# Request bodies: refused past this size (Django's forms, the API's JSON parser, and config/asgi.py
# before the body is read at all).
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("TIDEPOOL_MAX_BODY_BYTES", str(1024 * 1024)))
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:jobs"
LOGOUT_REDIRECT_URL = "login"

REDIS_URL = os.environ.get("REDIS_URL", "")
TIDEPOOL_REDIS_SOCKET_TIMEOUT = float(os.environ.get("TIDEPOOL_REDIS_SOCKET_TIMEOUT", "5"))
TIDEPOOL_REDIS_RETRIES = int(os.environ.get("TIDEPOOL_REDIS_RETRIES", "3"))


def redis_channel_layers(url: str) -> dict:
    """channels-redis's pub/sub layer, as shipped. Each process keeps one subscriber connection (a
    group is a Redis channel, so 200 sockets joining at once are 200 SUBSCRIBEs on it, not 200 pooled
    connections) and reads it 0.1 s at a time, so an idle socket never meets the read timeout. A
    command that finds its connection closed (Redis restarted) reconnects and tries again, up to
    TIDEPOOL_REDIS_RETRIES times with a backoff of 0.05-0.5 s; the subscriber connection subscribes
    to its groups again when it reconnects (redis-py's PubSub). While Redis is down a command fails
    after those retries: a websocket handshake is then refused (config/asgi.py)."""
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff

    host = {"address": url, "socket_timeout": TIDEPOOL_REDIS_SOCKET_TIMEOUT, "socket_connect_timeout": 2,
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), TIDEPOOL_REDIS_RETRIES)}
    return {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [host]}}}


if REDIS_URL:
    CHANNEL_LAYERS = redis_channel_layers(REDIS_URL)
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Tidepool's tasks are hints (node workers reconcile with the database), so no ack emulation: with
# it, kombu 5.7 crashes the whole worker ("Unrecoverable error: 'NoneType' object has no attribute
# 'hostname'") when Redis goes away while a message is unacknowledged.
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
# Node workers run pods under one in-process agent: threads, not forked children.
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = int(os.environ.get("TIDEPOOL_WORKER_CONCURRENCY", "4"))

REST_FRAMEWORK = {
    # v1's (scheduler.api.v1.auth.AUTHENTICATION): a personal token or the session; no HTTP Basic.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "scheduler.api.v1.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "scheduler.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "scheduler.api.parsers.exception_handler",
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Tidepool API",
    "DESCRIPTION": "GPU-cluster jobs, quotas and nodes (docs/api.md). Authenticate with "
    "`Authorization: Bearer <personal API token>` or the console's session (with its CSRF token).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "PREPROCESSING_HOOKS": ["scheduler.api.v1.schema.only_v1"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "scheduler.api.v1.schema.describe_fields",
    ],
    "ENUM_NAME_OVERRIDES": {"JobTypeEnum": "scheduler.models.JobType", "IdleModeEnum": "scheduler.models.IdleMode"},
}

TIDEPOOL_EXECUTOR = os.environ.get("TIDEPOOL_EXECUTOR", "local")
if TIDEPOOL_EXECUTOR not in {"local", "celery", "agents"}:
    raise ImproperlyConfigured(f"TIDEPOOL_EXECUTOR={TIDEPOOL_EXECUTOR!r}: use 'local', 'celery' or 'agents'.")
TIDEPOOL_EMBEDDED_SCHEDULER = env_bool("TIDEPOOL_EMBEDDED_SCHEDULER", TIDEPOOL_EXECUTOR == "local")
TIDEPOOL_SCHEDULER_INTERVAL = float(os.environ.get("TIDEPOOL_SCHEDULER_INTERVAL", "3"))
TIDEPOOL_SCHEDULER_MIN_GAP = float(os.environ.get("TIDEPOOL_SCHEDULER_MIN_GAP", "0.5"))
TIDEPOOL_GRACE_SECONDS = float(os.environ.get("TIDEPOOL_GRACE_SECONDS", "30"))
TIDEPOOL_NODE_TIMEOUT = float(os.environ.get("TIDEPOOL_NODE_TIMEOUT", "60"))
TIDEPOOL_HEARTBEAT_SECONDS = float(os.environ.get("TIDEPOOL_HEARTBEAT_SECONDS", "10"))
TIDEPOOL_RESTART_BACKOFF_BASE = float(os.environ.get("TIDEPOOL_RESTART_BACKOFF_BASE", "5"))
TIDEPOOL_RESTART_BACKOFF_CAP = float(os.environ.get("TIDEPOOL_RESTART_BACKOFF_CAP", "300"))
TIDEPOOL_HANG_TIMEOUT = float(os.environ.get("TIDEPOOL_HANG_TIMEOUT", "0"))
TIDEPOOL_IDEMPOTENCY_KEEP_HOURS = float(os.environ.get("TIDEPOOL_IDEMPOTENCY_KEEP_HOURS", "24"))
if not TIDEPOOL_IDEMPOTENCY_KEEP_HOURS > 0:  # 0 would purge a key before its client's retry
    raise ImproperlyConfigured(f"TIDEPOOL_IDEMPOTENCY_KEEP_HOURS={TIDEPOOL_IDEMPOTENCY_KEEP_HOURS}: hours above 0.")
TIDEPOOL_METRICS_TOKEN = os.environ.get("TIDEPOOL_METRICS_TOKEN", "")
TIDEPOOL_METRICS_ALLOW = env_list("TIDEPOOL_METRICS_ALLOW", "127.0.0.1/32,::1/128")
# HTTP requests inside Django at once per web process (config/asgi.py); below the pool size.
TIDEPOOL_WEB_CONCURRENCY = int(os.environ.get("TIDEPOOL_WEB_CONCURRENCY", "1"))
TIDEPOOL_DATA_DIR = Path(os.environ.get("TIDEPOOL_DATA_DIR", str(BASE_DIR / "var")))
# None: derived from TIDEPOOL_DATA_DIR where used (scheduler/paths.py).
TIDEPOOL_CHECKPOINT_ROOT = Path(os.environ["TIDEPOOL_CHECKPOINT_ROOT"]) if os.environ.get("TIDEPOOL_CHECKPOINT_ROOT") else None
TIDEPOOL_WORKSPACE_ROOT = Path(os.environ["TIDEPOOL_WORKSPACE_ROOT"]) if os.environ.get("TIDEPOOL_WORKSPACE_ROOT") else None
TIDEPOOL_POD_USER = os.environ.get("TIDEPOOL_POD_USER", "").strip()
TIDEPOOL_POD_ENV_ALLOW = env_list(
    "TIDEPOOL_POD_ENV_ALLOW", "PATH,LANG,LANGUAGE,LC_*,TZ,TERM,TMPDIR,LD_LIBRARY_PATH,CUDA_HOME,NCCL_*"
)
TIDEPOOL_RECONCILE_SECONDS = float(os.environ.get("TIDEPOOL_RECONCILE_SECONDS", "5"))
TIDEPOOL_LEASE_SECONDS = float(os.environ.get("TIDEPOOL_LEASE_SECONDS", "15"))


def env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit():
        raise ImproperlyConfigured(f"{name}={value!r}: a whole number ≥ 0 is expected.")
    return int(value)


TIDEPOOL_NODE_NAME = os.environ.get("TIDEPOOL_NODE_NAME", "")
TIDEPOOL_NODE_GPUS = env_int("TIDEPOOL_NODE_GPUS")
TIDEPOOL_NODE_GPU_TYPE = os.environ.get("TIDEPOOL_NODE_GPU_TYPE", "")
TIDEPOOL_NODE_CPU = env_int("TIDEPOOL_NODE_CPU")
TIDEPOOL_NODE_MEMORY_GIB = env_int("TIDEPOOL_NODE_MEMORY_GIB")
TIDEPOOL_NODE_RESOURCE_TYPE = os.environ.get("TIDEPOOL_NODE_RESOURCE_TYPE", "general")
if TIDEPOOL_NODE_RESOURCE_TYPE not in {"general", "lingjun"}:
    raise ImproperlyConfigured(f"TIDEPOOL_NODE_RESOURCE_TYPE={TIDEPOOL_NODE_RESOURCE_TYPE!r}: use 'general' or 'lingjun'.")
TIDEPOOL_NODE_ADDRESS = os.environ.get("TIDEPOOL_NODE_ADDRESS", "127.0.0.1")
TIDEPOOL_SCHEDULER_METRICS_PORT = env_int("TIDEPOOL_SCHEDULER_METRICS_PORT")
TIDEPOOL_GPU_SAMPLE_SECONDS = float(os.environ.get("TIDEPOOL_GPU_SAMPLE_SECONDS", "60"))
TIDEPOOL_SCHEDULER_METRICS_ADDR = os.environ.get("TIDEPOOL_SCHEDULER_METRICS_ADDR", "127.0.0.1")

TIDEPOOL_POD_RUNTIME = os.environ.get("TIDEPOOL_POD_RUNTIME", "host").strip() or "host"
if TIDEPOOL_POD_RUNTIME not in {"host", "podman"}:
    raise ImproperlyConfigured(f"TIDEPOOL_POD_RUNTIME={TIDEPOOL_POD_RUNTIME!r}: use 'host' or 'podman'.")
TIDEPOOL_POD_IMAGE = os.environ.get("TIDEPOOL_POD_IMAGE", "").strip()  # "": scheduler/node/runtime/image.py's
TIDEPOOL_POD_PULL = os.environ.get("TIDEPOOL_POD_PULL", "missing").strip()
TIDEPOOL_POD_REGISTRY = os.environ.get("TIDEPOOL_POD_REGISTRY", "").strip().rstrip("/")
TIDEPOOL_POD_REGISTRY_AUTH_FILE = os.environ.get("TIDEPOOL_POD_REGISTRY_AUTH_FILE", "").strip()
if TIDEPOOL_POD_PULL not in {"always", "missing", "never"}:
    raise ImproperlyConfigured(f"TIDEPOOL_POD_PULL={TIDEPOOL_POD_PULL!r}: use 'always', 'missing' or 'never'.")
TIDEPOOL_POD_UID = env_int("TIDEPOOL_POD_UID")
if TIDEPOOL_POD_UID == 0:
    raise ImproperlyConfigured("TIDEPOOL_POD_UID=0: pods never run as root; use an unprivileged uid such as 65534.")
TIDEPOOL_POD_PIDS_LIMIT = env_int("TIDEPOOL_POD_PIDS_LIMIT") or 4096
TIDEPOOL_POD_DEFAULT_MEMORY_GIB = float(os.environ.get("TIDEPOOL_POD_DEFAULT_MEMORY_GIB", "4"))
TIDEPOOL_POD_NETWORK = os.environ.get("TIDEPOOL_POD_NETWORK", "job").strip()
if TIDEPOOL_POD_NETWORK not in {"job", "none"}:
    raise ImproperlyConfigured(f"TIDEPOOL_POD_NETWORK={TIDEPOOL_POD_NETWORK!r}: use 'job' or 'none'.")
TIDEPOOL_POD_SUBNETS = os.environ.get("TIDEPOOL_POD_SUBNETS", "10.213.0.0/16").strip()
TIDEPOOL_POD_BLOCKED_NETWORKS = env_list("TIDEPOOL_POD_BLOCKED_NETWORKS", "")
TIDEPOOL_PODMAN = os.environ.get("TIDEPOOL_PODMAN", "podman")
TIDEPOOL_POD_OCI_RUNTIME = os.environ.get("TIDEPOOL_POD_OCI_RUNTIME", "runc")


def env_port_range(name: str, default: str) -> tuple[int, int]:
    value = os.environ.get(name, default).strip()
    low, sep, high = (part.strip() for part in value.partition("-"))
    if not (sep and low.isascii() and low.isdigit() and high.isascii() and high.isdigit()
            and 1024 <= int(low) <= int(high) <= 65535):
        raise ImproperlyConfigured(f"{name}={value!r}: two ports LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, e.g. 29600-29999.")
    return int(low), int(high)


TIDEPOOL_MASTER_PORT_RANGE = env_port_range("TIDEPOOL_MASTER_PORT_RANGE", "29600-29999")

TIDEPOOL_HTTPS = env_bool("TIDEPOOL_HTTPS", not DEBUG)
if TIDEPOOL_HTTPS:
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        # Server errors with their traceback (Django's default only mails them when DEBUG=0).
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        "tidepool": {
            "handlers": ["console"],
            "level": os.environ.get("TIDEPOOL_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}
