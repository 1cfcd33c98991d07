// Resolves `react` to the small React of these tests (fake-react.js), for web/react.js.
export async function resolve(specifier, context, next) {
  if (specifier === 'react') return { url: new URL('./fake-react.js', import.meta.url).href, shortCircuit: true };
  return next(specifier, context);
}
