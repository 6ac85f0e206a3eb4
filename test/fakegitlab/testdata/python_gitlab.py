"""Drives the fake GitLab with python-gitlab and prints what it saw as one JSON object.

Usage: python_gitlab.py URL TOKEN CA_FILE GROUP PROJECT
CA_FILE is the certificate to trust, or "" for a plain-HTTP fake.
"""

import json
import sys
import warnings

import gitlab


def main():
    url, token, ca_file, group, project = sys.argv[1:6]
    gl = gitlab.Gitlab(url, private_token=token, ssl_verify=ca_file or False)
    out = {}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gl.auth()  # GET /user
    out["user"] = {"id": gl.user.id, "username": gl.user.username, "state": gl.user.state}
    out["auth_warnings"] = [str(w.message) for w in caught]
    out["version"] = list(gl.version())  # GET /version; ("unknown", "unknown") if it fails

    grp = gl.groups.get(group)
    projects = grp.projects.list(include_subgroups=True, get_all=True)
    out["group_projects"] = [p.path_with_namespace for p in projects]

    # python-gitlab 3.12 has no manager for POST /user/runners; this is its raw request
    # path, sending tag_list as the comma-separated string the API documents.
    created = gl.http_post("/user/runners", post_data={
        "runner_type": "group_type", "group_id": grp.id, "description": "python-gitlab",
        "tag_list": "linux, x64", "run_untagged": False,
    })
    out["created"] = {"id": created["id"], "token_prefix": created["token"][:5]}
    runner = gl.runners.get(created["id"])
    out["created_tags"] = sorted(runner.tag_list)
    out["owned_runners"] = [r.id for r in gl.runners.list(type="group_type", get_all=True)]
    out["owned_runners_tagged"] = [r.id for r in gl.runners.list(tag_list="linux", get_all=True)]
    out["owned_runners_online"] = [r.id for r in gl.runners.list(status="online", get_all=True)]
    gl.runners.delete(created["id"])
    out["after_delete"] = [r.id for r in gl.runners.list(get_all=True)]

    jobs = gl.projects.get(project, lazy=True).jobs.list(scope=["pending", "running"], get_all=True)
    out["jobs"] = [{"id": j.id, "status": j.status, "tags": j.tag_list} for j in jobs]

    out["errors"] = {}
    for name, call in [
        ("missing_project", lambda: gl.projects.get(group + "/nope")),
        ("missing_runner", lambda: gl.runners.get(created["id"])),
        ("unknown_route", lambda: gl.users.get(1)),  # the fake serves no /users/:id
    ]:
        try:
            call()
            out["errors"][name] = None
        except gitlab.exceptions.GitlabGetError as e:
            out["errors"][name] = {"code": e.response_code, "message": e.error_message}
    try:
        gitlab.Gitlab(url, private_token="glpat-forged", ssl_verify=ca_file or False).auth()
        out["errors"]["forged_token"] = None
    except gitlab.exceptions.GitlabAuthenticationError as e:
        out["errors"]["forged_token"] = {"code": e.response_code, "message": e.error_message}

    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
