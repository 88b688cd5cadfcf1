# CPU image of the service (`foley serve`) and of its export workers (`foley worker`): numpy,
# PyAV, ONNX Runtime, FastAPI, Celery, and the tiers (service/models). No torch and no engines/:
# simulation and training are not part of the service's package.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

COPY pyproject.toml README.md constraints.txt ./
COPY service ./service
# Pinned: the image is the same build whenever it is built (constraints.txt says how it is made).
RUN pip install -c constraints.txt .

# The tiers are package data of the installed wheel: no FOLEY_MODELS_DIR needed.
ENV FOLEY_HOST=0.0.0.0 FOLEY_PORT=8000
# Export jobs' shared storage (a volume in docker-compose.yml takes this directory's owner).
RUN mkdir -p /data/exports && chown nobody /data/exports
EXPOSE 8000
USER nobody
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:8000/readyz')" || exit 1
CMD ["foley", "serve"]
