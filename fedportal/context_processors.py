from fedportal.roles import Role, user_roles


def navigation(request):
    roles = user_roles(getattr(request, "user", None))
    return {"user_roles": roles, "Role": Role}
