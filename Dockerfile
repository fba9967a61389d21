# The infersight sidecar: docker build -t infersight:0.1.0 .
# It listens beyond loopback in a container, so it needs the ingest token
# (exporter.ingest_token_file or INFERSIGHT_INGEST_TOKEN) or it refuses to start.
FROM python:3.12.7-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12.7-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65534:65534
EXPOSE 9400
ENTRYPOINT ["infersight"]
CMD ["exporter", "--listen-address", "0.0.0.0"]
