"""What every /api/v1/ view gets before its own code: HEAD answered as the JSON GET without a body
(RFC 9110 9.3.2: a server that answers GET answers HEAD; never as a CSV export, which would run the
export and audit one that nobody received), and a body over Django's upload limit refused with the
API's JSON 413 (Django's own answer is the site's HTML 400, which an API client cannot read)."""

from functools import wraps

from django.core.exceptions import BadRequest, RequestDataTooBig
from django.http import HttpResponse, RawPostDataException

from api.errors import form_body, too_large, unreadable


def guarded(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        head = request.method == "HEAD"
        if head:
            request.method = "GET"
            request.META["HTTP_ACCEPT"] = "application/json"  # a CSV export is made for a GET only
            request.__dict__.pop("headers", None)  # HttpRequest.headers is cached from META
        try:
            response = view(request, *args, **kwargs)
        except RequestDataTooBig:
            response = too_large()
        except BadRequest as exc:  # a body read before ninja's (the idempotency key's digest)
            response = unreadable(exc)
        except RawPostDataException:  # a form body the session's CSRF check parsed first
            response = form_body()
        finally:
            if head:
                request.method = "HEAD"
        if head and response.streaming:  # not iterated: its body is not sent
            response.close()
            headers = {k: v for k, v in response.items() if k.lower() != "content-length"}
            return HttpResponse(b"", status=response.status_code, headers=headers)
        if head:
            length = len(response.content)
            response.content = b""
            response["Content-Length"] = str(length)
        return response

    return wrapped
