"""Routes: the JSON API's views (django-ninja routers), one module per domain; each validates
its input, calls one action or presenter, and answers with a schema."""
