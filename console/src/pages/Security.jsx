// Security (#/security): for one tenant at a time, its admin roles (`GET|POST /admin/v2/tenants/{t}`,
// superusers only) and each namespace's grants (`GET .../permissions`, grant `POST
// .../permissions/{role}` with the actions, revoke `DELETE`; the tenant's admins and superusers).
//
// What must hold: a 403 on any part is shown in place as "your role may not see/change this" and
// the rest of the page still works; revoking goes through Confirm; a grant is checked (a role
// name, at least one action) before it is sent, and the list is read back after each change.
import { useState } from "preact/hooks";
import { ApiError, del, get, post } from "../api.js";
import { Confirm, ErrorBox, Loading, Notice, Table, useApi } from "../components/common.jsx";

const ACTIONS = ["produce", "consume", "functions", "sources", "sinks", "packages"];
const ROLE_NAME = /^[^\s/,]+$/;

async function visibleTenants(who) {
  try {
    return { list: await get("/admin/v2/tenants"), partial: false };
  } catch (e) {
    if (e instanceof ApiError && e.kind === "forbidden") return { list: who.tenants || [], partial: true };
    throw e;
  }
}

function Refused({ what }) {
  return <p class="warn" role="note">Your role may not {what}.</p>;
}

export function Security({ route, who }) {
  const tenants = useApi(() => visibleTenants(who), []);
  const [picked, setPicked] = useState(route.query.tenant || "");
  const list = tenants.data?.list || [];
  const tenant = list.includes(picked) ? picked : list[0];
  return (
    <section>
      <h1>Security</h1>
      <ErrorBox error={tenants.error} onRetry={tenants.reload} />
      {tenants.loading && <Loading what="Loading tenants" />}
      {tenants.data && (
        <>
          {tenants.data.partial && <p class="warn">Your role may not list every tenant: these are the tenants you administer.</p>}
          {list.length === 0 ? <p class="empty">No tenant to show.</p> : (
            <div class="toolbar">
              <label>
                Tenant
                <select value={tenant} onChange={(e) => setPicked(e.currentTarget.value)}>
                  {list.map((t) => <option key={t} value={t}>{t}</option>)}
                </select>
              </label>
            </div>
          )}
          {tenant && <TenantSecurity key={tenant} tenant={tenant} />}
        </>
      )}
    </section>
  );
}

function TenantSecurity({ tenant }) {
  const namespaces = useApi(() => get(`/admin/v2/namespaces/${encodeURIComponent(tenant)}`), [tenant]);
  return (
    <>
      <TenantAdmins tenant={tenant} />
      <h2>Namespace permissions</h2>
      {namespaces.error && (namespaces.error.kind === "forbidden"
        ? <Refused what={`see the namespaces of ${tenant}`} />
        : <ErrorBox error={namespaces.error} onRetry={namespaces.reload} />)}
      {namespaces.loading && <Loading what="Loading namespaces" />}
      {namespaces.data && namespaces.data.length === 0 && <p class="empty">No namespace in {tenant}.</p>}
      {(namespaces.data || []).map((full) => <NamespacePermissions key={full} full={full} />)}
    </>
  );
}

function TenantAdmins({ tenant }) {
  const path = `/admin/v2/tenants/${encodeURIComponent(tenant)}`;
  const info = useApi(() => get(path), [tenant]);
  const [text, setText] = useState(null);
  const [error, setError] = useState(null);
  const [problem, setProblem] = useState(null);
  const [saved, setSaved] = useState(null);
  const current = info.data?.adminRoles || [];
  const value = text === null ? current.join(", ") : text;
  const save = async (e) => {
    e.preventDefault();
    setSaved(null);
    setError(null);
    const roles = value.split(",").map((r) => r.trim()).filter(Boolean);
    const bad = roles.find((r) => !ROLE_NAME.test(r));
    setProblem(bad ? `"${bad}" is not a role name (no spaces or slashes).` : null);
    if (bad) return;
    try {
      await post(path, { ...info.data, adminRoles: roles });
      setSaved(`Saved: the admins of ${tenant} are ${roles.join(", ") || "none (superusers only)"}.`);
      setText(null);
      info.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="panel" aria-label={`Admins of ${tenant}`} onSubmit={save}>
      <h2>Tenant {tenant}: admin roles</h2>
      {info.loading && <Loading what="Loading the tenant" />}
      {info.error && (info.error.kind === "forbidden"
        ? <Refused what={`see or change the admins of ${tenant} (superusers only)`} />
        : <ErrorBox error={info.error} onRetry={info.reload} />)}
      {info.data && (
        <div class="toolbar">
          <label>
            Admin roles (comma-separated)
            <input type="text" value={value} size={40} onInput={(e) => setText(e.currentTarget.value)} />
          </label>
          <button type="submit" class="primary">Save admin roles</button>
          <span class="loading">allowed clusters: {(info.data.allowedClusters || []).join(", ") || "–"}</span>
        </div>
      )}
      {problem && <p class="error" role="alert">{problem}</p>}
      {error && (error.kind === "forbidden" ? <Refused what={`change the admins of ${tenant}`} /> : <ErrorBox error={error} />)}
      <Notice text={saved} />
    </form>
  );
}

function NamespacePermissions({ full }) {
  const [tenant, ns] = full.split("/");
  const base = `/admin/v2/namespaces/${encodeURIComponent(tenant)}/${encodeURIComponent(ns)}/permissions`;
  const perms = useApi(() => get(base), [full]);
  const [revoking, setRevoking] = useState(null);
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(null);

  const change = async (action, notice) => {
    setError(null);
    setSaved(null);
    try {
      await action();
      setSaved(notice);
      perms.reload();
    } catch (e) {
      setError(e);
    }
  };
  const rows = Object.entries(perms.data || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const columns = [
    ["Role", ([role]) => role],
    ["Actions", ([, actions]) => actions.join(", ")],
    ["", ([role]) => <button type="button" aria-label={`Revoke ${role} on ${full}`} onClick={() => setRevoking(role)}>Revoke</button>],
  ];
  return (
    <div class="panel" role="region" aria-label={`Permissions on ${full}`}>
      <h3>{full}</h3>
      {perms.loading && <Loading what="Loading permissions" />}
      {perms.error && (perms.error.kind === "forbidden"
        ? <Refused what={`see the permissions on ${full}`} />
        : <ErrorBox error={perms.error} onRetry={perms.reload} />)}
      {perms.data && <Table label={`Grants on ${full}`} columns={columns} rows={rows} empty="No role has a grant here (only the tenant's admins and superusers)." />}
      {perms.data && <GrantForm full={full} onGrant={(role, actions) => change(() => post(`${base}/${encodeURIComponent(role)}`, actions), `Saved: ${role} may ${actions.join(", ")} on ${full}.`)} />}
      {error && (error.kind === "forbidden" ? <Refused what={`change the permissions on ${full}`} /> : <ErrorBox error={error} />)}
      <Notice text={saved} />
      {revoking && (
        <Confirm
          title={`Revoke ${revoking}?`}
          message={`${revoking} loses every action on ${full} (grants on single topics stay).`}
          confirmLabel="Revoke"
          onCancel={() => setRevoking(null)}
          onConfirm={() => {
            const role = revoking;
            setRevoking(null);
            change(() => del(`${base}/${encodeURIComponent(role)}`), `Saved: ${role}'s grant on ${full} was revoked.`);
          }}
        />
      )}
    </div>
  );
}

function GrantForm({ full, onGrant }) {
  const [role, setRole] = useState("");
  const [actions, setActions] = useState(["consume"]);
  const [problem, setProblem] = useState(null);
  const submit = (e) => {
    e.preventDefault();
    const r = role.trim();
    if (!ROLE_NAME.test(r)) return setProblem("Name the role to grant to (no spaces or slashes).");
    if (actions.length === 0) return setProblem("Pick at least one action.");
    setProblem(null);
    onGrant(r, actions);
    setRole("");
  };
  const flip = (a) => setActions(actions.includes(a) ? actions.filter((x) => x !== a) : [...actions, a]);
  return (
    <form aria-label={`Grant on ${full}`} onSubmit={submit}>
      <div class="toolbar">
        <label>
          Role
          <input type="text" value={role} onInput={(e) => setRole(e.currentTarget.value)} />
        </label>
        <fieldset style={{ border: "none", padding: 0, margin: 0, display: "flex", gap: ".5rem" }}>
          <legend class="loading" style={{ fontSize: ".85rem" }}>Actions</legend>
          {ACTIONS.map((a) => (
            <label key={a} style={{ flexDirection: "row", alignItems: "center", color: "var(--ink)" }}>
              <input type="checkbox" checked={actions.includes(a)} onChange={() => flip(a)} /> {a}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary">Grant</button>
      </div>
      {problem && <p class="error" role="alert">{problem}</p>}
    </form>
  );
}
