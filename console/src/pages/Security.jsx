// Placeholder until the page is built.
export function Security() {
  return <h1>Security</h1>;
}
