# One image for every Sluice component; the Helm chart (helm/sluice) picks the command.
FROM python:3.11-slim

# The Python distribution the image holds (pyproject.toml), also the chart's appVersion.
LABEL org.opencontainers.image.title="django-sluice" \
      org.opencontainers.image.version="0.2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=settings

WORKDIR /app

# Requirements first, so a code change does not reinstall them.
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .

# The static files (the admin's CSS, the inbox bell's script) into STATIC_ROOT, /app/staticfiles, which whitenoise
# serves from the web pods (settings: WhiteNoiseMiddleware). Settings need a secret key to load; this one signs
# nothing, and the image never runs with it.
RUN DJANGO_SECRET_KEY=collectstatic-only-signs-nothing python manage.py collectstatic --noinput -v0

# The chart runs every container with this UID, a read-only root filesystem and /tmp as an emptyDir.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /app --shell /usr/sbin/nologin sluice
USER 10001

EXPOSE 8000
# Threaded workers (settings/gunicorn.py): one slow client holds one thread, not the pod. Put a buffering proxy
# (the ingress) in front in production.
CMD ["gunicorn", "--config", "python:settings.gunicorn", "settings.wsgi:application"]
