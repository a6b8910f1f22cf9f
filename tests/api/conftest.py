"""API test helpers: a token per user, and a Django test client that sends it as a bearer."""

import json

import pytest
from django.test import Client

from api.tokens import create_token


class ApiClient:
    """client.get/post/put/patch/delete(path, json=..., **headers) -> response, with the bearer token."""

    def __init__(self, token: str | None):
        self.client = Client()
        self.token = token

    def _headers(self, headers):
        extra = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        return {**extra, **headers}

    def request(self, method, path, json_body=None, *, data=None, content_type="application/json", headers=None):
        if json_body is not None:
            data = json.dumps(json_body)
        call = getattr(self.client, method.lower())
        kwargs = {"headers": self._headers(headers or {})}
        if method.upper() != "GET":
            kwargs.update(data=data or "", content_type=content_type)
        else:
            kwargs.update(data=data)
        return call(path, **kwargs)

    def get(self, path, params=None, **headers):
        return self.request("GET", path, data=params, headers=headers)

    def post(self, path, body=None, **headers):
        return self.request("POST", path, body if body is not None else {}, headers=headers)

    def patch(self, path, body=None, **headers):
        return self.request("PATCH", path, body if body is not None else {}, headers=headers)

    def delete(self, path, **headers):
        return self.request("DELETE", path, headers=headers)


@pytest.fixture
def token_for():
    def make(user, **kwargs) -> str:
        return create_token(user, actor=user, **kwargs).secret

    return make


@pytest.fixture
def api_as(token_for):
    """api_as(user) -> ApiClient with a fresh token of that user; api_as(None) sends no token."""

    def make(user, **kwargs) -> ApiClient:
        return ApiClient(None if user is None else token_for(user, **kwargs))

    return make
