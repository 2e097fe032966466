import { listAgents } from '../api.js';
import { AgentSparkline } from '../components/agent-sparkline.js';
import { CopyId } from '../components/copy-id.js';
import { Link } from '../components/link.js';
import { TimeAgo } from '../components/time-ago.js';
import { readMe } from '../owner-api.js';
import { agentPath, newAgentPath } from '../router.js';
import { useAsync } from '../use-async.js';

export function AgentsPage() {
  const agents = useAsync((signal) => listAgents(signal), []);
  const me = useAsync((signal) => readMe(signal), []);
  const canCreate = me.state === 'done' && me.value.canCreateAgents;
  return (
    <main>
      <div class="toolbar">
        <h1>Agents</h1>
        {canCreate && (
          <Link href={newAgentPath} class="button primary">
            New agent
          </Link>
        )}
      </div>
      {agents.state === 'loading' && <p class="muted">Loading…</p>}
      {agents.state === 'error' && (
        <p class="error-text">Could not load your agents: {agents.message}</p>
      )}
      {agents.state === 'done' && agents.value.agents.length === 0 && (
        <section class="empty">
          <h2>No agents yet</h2>
          {canCreate ? (
            <p>
              Create your first agent with <Link href={newAgentPath}>New agent</Link>: you get its
              API key and a snippet to paste, and see its first run arrive here.
            </p>
          ) : (
            <p>
              You have no role on any agent. An operator creates one with{' '}
              <code>flightlog agent create --name my-agent</code> and gives you a role with{' '}
              <code>flightlog member grant --agent ID --user YOUR_ID --role owner</code>.
            </p>
          )}
        </section>
      )}
      {agents.state === 'done' && agents.value.agents.length > 0 && (
        <table class="grid" aria-label="Your agents">
          <thead>
            <tr>
              <th>Agent</th>
              <th>Role</th>
              <th class="num">Runs</th>
              <th>Last 24 h</th>
              <th>Last run</th>
              <th>Verified</th>
            </tr>
          </thead>
          <tbody>
            {agents.value.agents.map((agent) => (
              <tr key={agent.agentId} data-agent-id={agent.agentId}>
                <td>
                  <Link href={agentPath(agent.agentId)} class="strong">
                    {agent.name ?? agent.agentId}
                  </Link>{' '}
                  {agent.name !== null && <CopyId id={agent.agentId} />}
                </td>
                <td>{agent.role}</td>
                <td class="num">
                  {agent.traceCount?.toLocaleString() ?? '—'}
                  {agent.traceCountCapped ? '+' : ''}
                </td>
                <td>
                  <AgentSparkline agentId={agent.agentId} />
                </td>
                <td>
                  <TimeAgo iso={agent.lastTraceAt} />
                </td>
                <td>
                  {agent.verifiedAt ? (
                    <TimeAgo iso={agent.verifiedAt} />
                  ) : (
                    <span class="muted">not yet</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
