-- Argo CD health check for pulumi.com/Stack (stackyard and the Pulumi
-- Kubernetes Operator v2 write the same status).
--
-- It reads the kstatus conditions the operator maintains, independent of
-- their order in the list, and first makes sure the status describes the
-- object as it is now:
--   * being deleted (a finalizer runs `pulumi destroy` first) -> Progressing
--   * a spec change held for a promotion (a governed Stack)   -> Suspended
--   * a spec change or reconcile request not yet handled      -> Progressing
--   * Stalled=True (only a person can move it on)             -> Degraded
--   * Reconciling=True (an update is running or retrying)     -> Progressing
--   * Ready=True                                              -> Healthy
local hs = { status = "Progressing", message = "Waiting for the stack to be reconciled" }

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "The stack is being deleted"
  if obj.spec ~= nil and obj.spec.destroyOnFinalize == true then
    hs.message = "The stack is being deleted; its resources are destroyed first"
  end
  return hs
end

local status = obj.status
if status == nil then
  return hs
end

local generation = obj.metadata and obj.metadata.generation

-- A change to the spec of a Stack that a stage governs, held until a
-- promotion of the stage previews and approves it: the Stack keeps what
-- it deployed, and a person decides, as for a paused rollout.
local held = status.heldSpec
if held ~= nil and generation ~= nil and held.generation == generation then
  hs.status = "Suspended"
  hs.message = "A change to the spec waits for a promotion"
  if status.conditions ~= nil then
    for _, condition in ipairs(status.conditions) do
      if condition.type == "ChangePending" and condition.status == "True" and condition.message ~= nil then
        hs.message = condition.message
      end
    end
  end
  return hs
end

if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.message = "Waiting for the operator to handle generation " .. tostring(generation)
  return hs
end

local annotations = obj.metadata and obj.metadata.annotations
local request = annotations and annotations["pulumi.com/reconciliation-request"]
if request ~= nil and request ~= status.observedReconcileRequest then
  hs.message = "Waiting for the operator to handle reconcile request " .. request
  return hs
end

local conditions = {}
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    conditions[condition.type] = condition
  end
end

local function isTrue(name)
  return conditions[name] ~= nil and conditions[name].status == "True"
end

if isTrue("Stalled") then
  hs.status = "Degraded"
  hs.message = conditions["Stalled"].message or "The stack is stalled"
elseif isTrue("Reconciling") then
  hs.status = "Progressing"
  hs.message = conditions["Reconciling"].message or "The stack is being processed"
elseif isTrue("Ready") then
  hs.status = "Healthy"
  hs.message = conditions["Ready"].message or "The stack is up to date"
end
return hs
