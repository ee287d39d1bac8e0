# The Strata image used by compose.yaml: one image, the role is the command.
FROM python:3.11-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends default-jre-headless make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/strata
COPY . .
RUN python -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python proto/build.py
ENV PATH=/opt/strata/.venv/bin:$PATH
ENTRYPOINT ["strata"]
