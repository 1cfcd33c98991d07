// A small React for the hook's node tests (web/react.js imports `react`; the loader beside
// this file resolves it here in web/test/react/*.test.js). What the hook relies on and
// nothing else: function components and context providers rendered into one tree, the hooks
// useState, useRef, useEffect, useCallback and useContext with React's rules (a hook's state
// by its order in its component; an effect runs after the render that changed its deps, its
// cleanup first; children's effects before their parent's), and state updates that render the
// tree again (batched in a microtask). The browser test runs the hook on React itself.

let rendering = null; // { instance, index, contexts }
let roots = [];

export function createContext(defaultValue) {
  const context = { defaultValue };
  context.Provider = { provides: context };
  return context;
}

export function createElement(type, props, ...children) {
  const given = children.length === 0 ? props?.children : children.length === 1 ? children[0] : children;
  return { type, props: { ...(props ?? {}), children: given } };
}

function hook(initial) {
  const { instance } = rendering;
  const index = rendering.index++;
  if (instance.hooks.length <= index) instance.hooks.push(initial());
  return instance.hooks[index];
}

const changed = (previous, next) =>
  previous === undefined || next === undefined || previous.length !== next.length || next.some((d, i) => !Object.is(d, previous[i]));

export function useState(initial) {
  const root = rendering.root;
  const slot = hook(() => ({ value: typeof initial === 'function' ? initial() : initial }));
  slot.set ??= (next) => {
    slot.value = typeof next === 'function' ? next(slot.value) : next;
    root.schedule();
  };
  return [slot.value, slot.set];
}

export function useRef(initial) {
  return hook(() => ({ current: initial }));
}

export function useCallback(fn, deps) {
  const slot = hook(() => ({}));
  if (changed(slot.deps, deps)) {
    slot.fn = fn;
    slot.deps = deps;
  }
  return slot.fn;
}

export function useEffect(effect, deps) {
  const slot = hook(() => ({ cleanup: undefined }));
  if (changed(slot.deps, deps)) {
    slot.deps = deps;
    rendering.instance.pending.push(() => {
      if (typeof slot.cleanup === 'function') slot.cleanup();
      slot.cleanup = effect();
    });
  }
}

export function useContext(context) {
  for (let i = rendering.contexts.length - 1; i >= 0; i -= 1) {
    if (rendering.contexts[i].context === context) return rendering.contexts[i].value;
  }
  return context.defaultValue;
}

/** Render `element` into a new root; returns { update(element), unmount(), renders }. */
export function render(element) {
  const instances = new Map();
  let scheduled = false;
  const root = {
    element,
    renders: 0,
    schedule() {
      if (scheduled) return;
      scheduled = true;
      queueMicrotask(() => {
        scheduled = false;
        if (roots.includes(root)) draw();
      });
    },
  };
  const effects = [];
  const visit = (node, path, contexts) => {
    if (node === null || node === undefined || typeof node === 'boolean' || typeof node === 'string') return;
    if (Array.isArray(node)) {
      node.forEach((child, i) => visit(child, `${path}.${i}`, contexts));
      return;
    }
    if (node.type?.provides) {
      visit(node.props.children, `${path}>`, [...contexts, { context: node.type.provides, value: node.props.value }]);
      return;
    }
    const key = `${path}:${node.type.name}`;
    let instance = instances.get(key);
    if (!instance) {
      instance = { hooks: [], pending: [] };
      instances.set(key, instance);
    }
    const outer = rendering;
    rendering = { instance, index: 0, contexts, root };
    let output;
    try {
      output = node.type(node.props);
    } finally {
      rendering = outer;
    }
    visit(output, `${key}/`, contexts);
    // Children first: their effects were queued as they were visited.
    effects.push(...instance.pending.splice(0));
  };
  const draw = () => {
    root.renders += 1;
    visit(root.element, 'root', []);
    for (const effect of effects.splice(0)) effect();
  };
  root.update = (next) => {
    root.element = next;
    draw();
  };
  root.unmount = () => {
    roots = roots.filter((r) => r !== root);
    for (const instance of instances.values()) {
      for (const slot of instance.hooks) if (typeof slot.cleanup === 'function') slot.cleanup();
    }
  };
  roots.push(root);
  draw();
  return root;
}
