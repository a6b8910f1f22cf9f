from fedportal.roles import Role, user_roles


def navigation(request):
    roles = user_roles(getattr(request, "user", None))
    # A sorted tuple: templates loop over it in a stable order and still test `"admin" in user_roles`.
    return {"user_roles": tuple(sorted(roles)), "Role": Role}
