import type { MemberRole } from '@flightlog/protocol';
import { useEffect, useState } from 'preact/hooks';
import { Link } from '../components/link.js';
import { SecretValue } from '../components/secret-value.js';
import { TimeAgo } from '../components/time-ago.js';
import {
  createKey,
  listKeys,
  listMembers,
  putMember,
  readAgent,
  removeMember,
  renameAgent,
  revokeKey,
  type AgentKey,
  type AgentMember,
  type MemberAgent,
} from '../owner-api.js';
import { agentPath } from '../router.js';
import { useAsync } from '../use-async.js';

const ROLES: readonly MemberRole[] = ['owner', 'editor', 'viewer'];

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** An agent's name, keys and members: owners manage them; other roles are told who can. */
export function AgentSettingsPage(props: { agentId: string }) {
  const agent = useAsync((signal) => readAgent(props.agentId, signal), [props.agentId]);
  return (
    <main>
      <nav class="crumbs">
        <Link href="/">Agents</Link> <span aria-hidden="true">/</span>{' '}
        <Link href={agentPath(props.agentId)}>{props.agentId}</Link>{' '}
        <span aria-hidden="true">/</span> <span>Settings</span>
      </nav>
      {agent.state === 'loading' && <p class="muted">Loading…</p>}
      {agent.state === 'error' && <p class="error-text">{agent.message}</p>}
      {agent.state === 'done' && <Settings key={agent.value.id} agent={agent.value} />}
    </main>
  );
}

/** The settings of one loaded agent; a rename shows in its heading at once. */
function Settings(props: { agent: MemberAgent }) {
  const [agent, setAgent] = useState(props.agent);
  const owner = agent.role === 'owner';
  return (
    <>
      <h1>{agent.name ?? agent.id}: settings</h1>
      <p class="muted">
        Your role: <strong>{agent.role}</strong> ·{' '}
        {agent.verifiedAt ? 'verified' : 'not verified yet'}
      </p>
      {owner ? (
        <>
          <NameSection agent={agent} onRenamed={setAgent} />
          <KeysSection agentId={agent.id} />
          <MembersSection agentId={agent.id} />
        </>
      ) : (
        <>
          <section class="settings-section" aria-label="Name">
            <h2>Name</h2>
            <p data-testid="agent-name">
              {agent.name ?? <span class="muted">No name: the agent is shown by its id.</span>}
            </p>
          </section>
          <div class="banner" role="note">
            Only owners manage this agent's name, keys and members. Ask an owner to change your role
            if you need to.
          </div>
        </>
      )}
    </>
  );
}

/** The owner's rename form: what the server kept is shown, and said, once it answers. */
function NameSection(props: { agent: MemberAgent; onRenamed: (agent: MemberAgent) => void }) {
  const [name, setName] = useState(props.agent.name ?? '');
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState('');
  const [error, setError] = useState<string | null>(null);
  return (
    <section class="settings-section" aria-label="Name">
      <h2>Name</h2>
      <form
        class="rename-form"
        onSubmit={(event) => {
          event.preventDefault();
          setBusy(true);
          setSaved('');
          setError(null);
          renameAgent(props.agent.id, name.trim()).then(
            (agent) => {
              setBusy(false);
              setName(agent.name ?? '');
              setSaved(
                agent.name === null
                  ? 'Name cleared: the agent is shown by its id.'
                  : `Saved: the agent is now called “${agent.name}”.`,
              );
              props.onRenamed(agent);
            },
            (e: unknown) => {
              setBusy(false);
              setError(`Not saved: ${messageOf(e)}`);
            },
          );
        }}
      >
        <label htmlFor="agent-name">
          Agent name
          <input
            id="agent-name"
            type="text"
            name="name"
            maxLength={256}
            placeholder={props.agent.id}
            aria-describedby="agent-name-hint"
            value={name}
            onInput={(event) => {
              setName(event.currentTarget.value);
              // "Saved" beside a field edited since would say something no longer true
              setSaved('');
              setError(null);
            }}
          />
        </label>
        <button type="submit" class="button primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save'}
        </button>
      </form>
      <p id="agent-name-hint" class="muted small">
        Shown in the list of agents to every member. Leave it empty to show the agent by its id.
      </p>
      {/* always present, so that screen readers announce what is put in it */}
      <p class="ok-text" role="status" aria-live="polite">
        {saved}
      </p>
      {error && (
        <p class="error-text" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/** Rows of a paged list, with "Load more" while the API has more; `reload` reads it again. */
function usePaged<T>(
  load: (cursor: string | null) => Promise<{ items: T[]; nextCursor: string | null }>,
) {
  const [items, setItems] = useState<T[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let current = true;
    load(null).then(
      (page) => {
        if (!current) return;
        setItems(page.items);
        setNext(page.nextCursor);
      },
      (e: unknown) => current && setError(messageOf(e)),
    );
    return () => {
      current = false;
    };
  }, [version]);
  const more = () =>
    void load(next).then(
      (page) => {
        setItems((rows) => [...rows, ...page.items]);
        setNext(page.nextCursor);
      },
      (e: unknown) => setError(messageOf(e)),
    );
  return { items, next, error, setError, more, reload: () => setVersion((v) => v + 1) };
}

function KeysSection(props: { agentId: string }) {
  const keys = usePaged<AgentKey>((cursor) =>
    listKeys(props.agentId, cursor).then((p) => ({ items: p.keys, nextCursor: p.nextCursor })),
  );
  const [issued, setIssued] = useState<{ keyId: string; apiKey: string } | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  return (
    <section class="settings-section" aria-label="API keys">
      <div class="toolbar">
        <h2>API keys</h2>
        <button
          type="button"
          class="button primary"
          onClick={() =>
            void createKey(props.agentId).then(
              (key) => {
                setIssued(key);
                keys.reload();
              },
              (e: unknown) => keys.setError(messageOf(e)),
            )
          }
        >
          New key
        </button>
      </div>
      {issued && (
        <div class="banner warning issued-key" role="status">
          <p>Copy the new key now: it is shown only this once.</p>
          <SecretValue label="New API key" value={issued.apiKey} />
        </div>
      )}
      {keys.error && (
        <p class="error-text" role="alert">
          {keys.error}
        </p>
      )}
      <table class="grid" aria-label="Keys">
        <thead>
          <tr>
            <th>Key id</th>
            <th>Issued</th>
            <th>State</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {keys.items.map((key) => (
            <tr key={key.keyId} data-key-id={key.keyId}>
              <td>
                <code>{key.keyId}</code>
              </td>
              <td>
                <TimeAgo iso={key.createdAt} />
              </td>
              <td>{key.revokedAt ? <span class="muted">revoked</span> : 'active'}</td>
              <td>
                {!key.revokedAt && (
                  <button
                    type="button"
                    class={confirming === key.keyId ? 'button danger' : 'button'}
                    onClick={() => {
                      // a second click confirms: a revoked key cannot come back
                      if (confirming !== key.keyId) {
                        setConfirming(key.keyId);
                        return;
                      }
                      setConfirming(null);
                      revokeKey(props.agentId, key.keyId).then(keys.reload, (e: unknown) =>
                        keys.setError(messageOf(e)),
                      );
                    }}
                  >
                    {confirming === key.keyId ? 'Revoke: sure?' : 'Revoke'}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {keys.next && (
        <button type="button" class="button" onClick={keys.more}>
          Load more keys
        </button>
      )}
    </section>
  );
}

function MembersSection(props: { agentId: string }) {
  const members = usePaged<AgentMember>((cursor) =>
    listMembers(props.agentId, cursor).then((p) => ({
      items: p.members,
      nextCursor: p.nextCursor,
    })),
  );
  const [userId, setUserId] = useState('');
  const [role, setRole] = useState<MemberRole>('viewer');
  const act = (work: Promise<unknown>) =>
    work.then(
      () => {
        members.setError(null);
        members.reload();
      },
      (e: unknown) => {
        members.setError(messageOf(e));
        // what the server kept, not what the select shows
        members.reload();
      },
    );
  return (
    <section class="settings-section" aria-label="Members">
      <h2>Members</h2>
      {members.error && (
        <p class="error-text" role="alert">
          {members.error}
        </p>
      )}
      <table class="grid" aria-label="Members of this agent">
        <thead>
          <tr>
            <th>User</th>
            <th>Role</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {members.items.map((member) => (
            <tr key={member.userId} data-user-id={member.userId}>
              <td>{member.userId}</td>
              <td>
                <select
                  aria-label={`Role of ${member.userId}`}
                  value={member.role}
                  onChange={(event) =>
                    void act(
                      putMember(
                        props.agentId,
                        member.userId,
                        event.currentTarget.value as MemberRole,
                      ),
                    )
                  }
                >
                  {ROLES.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              </td>
              <td>
                <button
                  type="button"
                  class="button"
                  aria-label={`Remove ${member.userId}`}
                  onClick={() => void act(removeMember(props.agentId, member.userId))}
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {members.next && (
        <button type="button" class="button" onClick={members.more}>
          Load more members
        </button>
      )}
      <form
        class="grant-form"
        onSubmit={(event) => {
          event.preventDefault();
          const id = userId.trim();
          if (!id) return;
          void act(putMember(props.agentId, id, role)).then(() => setUserId(''));
        }}
      >
        <label htmlFor="grant-user">
          User id
          <input
            id="grant-user"
            aria-label="User id to grant"
            type="text"
            name="userId"
            maxLength={256}
            value={userId}
            onInput={(event) => setUserId(event.currentTarget.value)}
          />
        </label>
        <label htmlFor="grant-role">
          Role
          <select
            id="grant-role"
            aria-label="Role to grant"
            name="role"
            value={role}
            onChange={(event) => setRole(event.currentTarget.value as MemberRole)}
          >
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" class="button primary">
          Grant
        </button>
      </form>
    </section>
  );
}
