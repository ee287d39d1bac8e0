// The console's shell: who is logged in, the navigation, and which page the hash names.
// On start it asks `GET /admin/v2/console/whoami`: 200 → the pages (authentication off, or a
// client certificate the browser presented, or saved credentials that still work); 401 → the
// login page. Any later 401 (an expired token) brings the login page back with the reason.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError, onAuthError, whoami } from "./api.js";
import { ErrorBox, Loading } from "./components/common.jsx";
import { zone } from "./format.js";
import { Audit } from "./pages/Audit.jsx";
import { Cluster } from "./pages/Cluster.jsx";
import { Login } from "./pages/Login.jsx";
import { Namespace } from "./pages/Namespace.jsx";
import { Security } from "./pages/Security.jsx";
import { Tenants } from "./pages/Tenants.jsx";
import { Topic } from "./pages/Topic.jsx";
import { useRoute } from "./router.js";
import { setCredentials } from "./session.js";

const PAGES = { cluster: Cluster, tenants: Tenants, namespace: Namespace, topic: Topic, security: Security, audit: Audit };
const NAV = [["cluster", "Cluster"], ["tenants", "Tenants & topics"], ["security", "Security"], ["audit", "Audit log"]];

function App() {
  const route = useRoute();
  const [who, setWho] = useState(null);     // whoami's answer once logged in
  const [authError, setAuthError] = useState(null);
  const [startError, setStartError] = useState(null);

  const check = async () => {
    try {
      setWho(await whoami());
      setStartError(null);
    } catch (e) {
      if (e instanceof ApiError && e.kind === "auth") setWho(null);
      else setStartError(e);
    }
  };
  useEffect(() => {
    check();
    return onAuthError((e) => {
      setAuthError(e);
      setWho(null);
    });
  }, []);

  if (startError) return <main class="page"><h1>Strata console</h1><ErrorBox error={startError} onRetry={check} /></main>;
  if (who === null) {
    return <Login reason={authError} onLoggedIn={(w) => { setAuthError(null); setWho(w); if (route.page === "login") window.location.hash = "#/cluster"; }} />;
  }
  // no page named: a superuser starts at the cluster, any other role at its tenants
  const pageName = /^#\/?[a-z]/.test(window.location.hash) ? route.page : (who.superuser ? "cluster" : "tenants");
  const Page = PAGES[pageName] || Cluster;
  const logout = () => { setCredentials(null); setWho(null); setAuthError(null); check(); };
  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href="#/cluster">Strata</a>
        <nav aria-label="Main">
          {NAV.map(([id, label]) => (
            <a key={id} href={`#/${id}`} aria-current={pageName === id ? "page" : undefined}>{label}</a>
          ))}
        </nav>
        <span class="who" title={`times in ${zone()}`}>
          {who.role ? <>role <strong data-testid="role">{who.role}</strong>{who.superuser ? " (superuser)" : ""}</> : "authentication off"}
          {who.authenticationEnabled && who.method !== "tls" && <button type="button" onClick={logout}>Log out</button>}
        </span>
      </header>
      <main class="page" id="main">
        <Page route={route} who={who} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app"));
