// The login page: a token (Strata's JWTs, as `strata tokens create` makes them) or a user name
// and password (the broker's basic-auth file). The credentials are checked with whoami before
// they are kept; a browser with a client certificate (mTLS) never sees this page.
import { useState } from "preact/hooks";
import { ApiError, whoami } from "../api.js";
import { ErrorBox } from "../components/common.jsx";
import { setCredentials } from "../session.js";

export function Login({ reason, onLoggedIn }) {
  const [mode, setMode] = useState("token");
  const [token, setToken] = useState("");
  const [user, setUser] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const submit = async (ev) => {
    ev.preventDefault();
    const creds = mode === "token" ? { kind: "token", token: token.trim() } : { kind: "basic", user, password };
    if (mode === "token" && !creds.token) return setError(new ApiError(0, "Enter a token.", "invalid"));
    if (mode === "basic" && (!user || !password)) return setError(new ApiError(0, "Enter a user name and a password.", "invalid"));
    setBusy(true);
    setCredentials(creds);
    try {
      const who = await whoami();
      setError(null);
      onLoggedIn(who);
    } catch (e) {
      setCredentials(null);
      setError(e.kind === "auth" ? new ApiError(401, `Login refused: ${e.reason}`, "invalid") : e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login page">
      <h1>Strata console</h1>
      <p>This broker asks for credentials: a token, or a user name and password.</p>
      {reason && <ErrorBox error={reason} />}
      <div role="radiogroup" aria-label="Login with" class="modes">
        <label><input type="radio" name="mode" checked={mode === "token"} onChange={() => setMode("token")} /> Token</label>
        <label><input type="radio" name="mode" checked={mode === "basic"} onChange={() => setMode("basic")} /> User name and password</label>
      </div>
      <form onSubmit={submit} aria-label="Login">
        {mode === "token" ? (
          <label>Token
            <textarea name="token" rows={4} value={token} onInput={(e) => setToken(e.currentTarget.value)} autocomplete="off" />
          </label>
        ) : (
          <>
            <label>User name<input name="user" value={user} onInput={(e) => setUser(e.currentTarget.value)} autocomplete="username" /></label>
            <label>Password<input name="password" type="password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} autocomplete="current-password" /></label>
          </>
        )}
        <button type="submit" disabled={busy}>Log in</button>
      </form>
      <ErrorBox error={error} />
    </main>
  );
}
